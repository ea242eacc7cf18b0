package mailbox

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshd/meshd/proto"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRenderGolden pins the exact text of a mirror file.
func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		it   Item
	}{
		{"message.txt", Item{
			Env:      sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("Deploy finished.\nAll green.", nil)),
			Priority: "normal", FromName: "alice", ToText: "#general"}},
		{"request.txt", Item{
			Env:      sign(t, alice, 2, proto.ToPeer(pub(bob)), request(t, "run-tests", `{"suite":"unit","shards":[1,2],"verbose":true}`, 1, &parentReqID)),
			Priority: "high", FromName: "alice", ToText: "@bob"}},
	} {
		got, err := Render(tc.it)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tc.file)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: rendered\n%s\nwant\n%s", tc.file, got, want)
		}
		if _, err := Verify(want, VerifyOptions{}); err != nil {
			t.Errorf("%s: golden file does not verify: %v", tc.file, err)
		}
	}
}

func TestRenderDefaultsAndEscapes(t *testing.T) {
	se := sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("x", nil))
	b, err := Render(Item{Env: se, FromName: "ali\nce\x00\u2028", ToText: "#gen\reral"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"From: ali?ce?? (" + pub(alice).Fingerprint() + ")\n", "To: #gen?eral\n"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("lacks %q:\n%s", want, b)
		}
	}
	// The verifier applies the same rendering: the file verifies, with the
	// names unchecked.
	if _, err := Verify(b, VerifyOptions{}); err != nil {
		t.Errorf("escaped file: %v", err)
	}
	b, err = Render(Item{Env: se})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"From: - (", "To: #" + chanGeneral.String() + "\n"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("lacks %q:\n%s", want, b)
		}
	}
	if v, err := Verify(b, VerifyOptions{}); err != nil || len(v.Unchecked) != 1 {
		t.Errorf("default names: %v, unchecked %q (want only the From name)", err, v.Unchecked)
	}
	dm := sign(t, alice, 2, proto.ToPeer(pub(bob)), msg("x", nil))
	if b, _ := Render(Item{Env: dm}); !bytes.Contains(b, []byte("To: @"+pub(bob).Fingerprint()+"\n")) {
		t.Errorf("dm default To:\n%s", b)
	}
	for _, bad := range []Item{
		{Env: se, ToText: "@bob"},
		{Env: dm, ToText: "#general"},
		{Env: se, Priority: "urgent"},
		{Env: &proto.SignedEnvelope{Envelope: se.Envelope}},
		{},
	} {
		if _, err := Render(bad); err == nil {
			t.Errorf("Render(%+v) succeeded", bad)
		}
	}
	pr := &proto.SignedEnvelope{Envelope: proto.Envelope{ID: envID(9), Kind: proto.KindPresence, To: proto.ToOrg("acme"),
		Presence: &proto.Presence{State: proto.Online}}, Raw: []byte{1}}
	if _, err := Render(Item{Env: pr}); !errors.Is(err, ErrUnsupportedKind) {
		t.Errorf("presence: %v, want ErrUnsupportedKind", err)
	}
}

// TestArmorLineByLine checks the armor encoder, which encodes line by
// line, against the whole encoding cut into lines, at every length up to
// a few lines and around each line boundary.
func TestArmorLineByLine(t *testing.T) {
	for n := 0; n <= 5*armorLineBytes+2; n++ {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i*7 + n)
		}
		enc := base64.StdEncoding.EncodeToString(raw)
		want := ArmorBegin + "\n"
		for len(enc) > armorWidth {
			want += enc[:armorWidth] + "\n"
			enc = enc[armorWidth:]
		}
		if enc != "" {
			want += enc + "\n"
		}
		want += ArmorEnd + "\n"
		if got := armor(raw); got != want {
			t.Fatalf("%d bytes:\n%s\nwant\n%s", n, got, want)
		}
		if len(want) > armorSize(raw) {
			t.Fatalf("%d bytes: armorSize %d < %d", n, armorSize(raw), len(want))
		}
	}
}
