package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// mvFixture is a home with a roster (alice, admin; bob, operator) and
// channel #general, and mailbox files rendered from envelopes they signed.
type mvFixture struct {
	home             string
	general, dm, req string // files that verify
	bare             string // a home with no roster
	bobFP, aliceFP   string
	generalID        uuid.UUID
}

func newMVFixture(t *testing.T) mvFixture {
	t.Helper()
	aliceHome, _ := node(t, "alice")
	bobHome, bobKey := node(t, "bob")
	ok(t, "--home", aliceHome, "roster", "init", "--org", "acme")
	ok(t, "--home", aliceHome, "roster", "add", bobKey, "--role", "operator", "--name", "bob")
	alice, err := home.Open(aliceHome).LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	bob, err := home.Open(bobHome).LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	r, err := home.Open(aliceHome).LoadRoster()
	if err != nil {
		t.Fatal(err)
	}
	p, err := channel.New("acme", "general", nil, nil, true, alice.Key)
	if err != nil {
		t.Fatal(err)
	}
	set := channel.NewSet()
	if _, err := set.Merge(r, p); err != nil {
		t.Fatal(err)
	}
	if err := set.Save(filepath.Join(aliceHome, "channels")); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	n := 0
	write := func(name string, key home.Identity, to proto.Destination, toText string, set func(*proto.Envelope)) string {
		n++
		id, _ := uuid.NewV7()
		e := &proto.Envelope{ID: id, From: key.Pub, To: to, TS: time.Now().UnixMilli(), TTL: proto.DefaultTTL,
			Seq: uint64(n), Epoch: uuid.New()}
		set(e)
		se, err := proto.SignEnvelope(key.Key, e)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mailbox.Render(mailbox.Item{Env: se, Priority: "normal", FromName: key.Name, ToText: toText})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	f := mvFixture{home: aliceHome, bare: bobHome, bobFP: bob.Pub.Fingerprint(), aliceFP: alice.Pub.Fingerprint(), generalID: p.ID}
	f.general = write("general.txt", bob, proto.ToChannel(p.ID), "#general", func(e *proto.Envelope) {
		e.Kind, e.Message = proto.KindMessage, &proto.Message{Body: "tests are green"}
	})
	f.dm = write("dm.txt", alice, proto.ToPeer(bob.Pub), "@bob", func(e *proto.Envelope) {
		e.Kind, e.Message = proto.KindMessage, &proto.Message{Body: "hi bob"}
	})
	f.req = write("req.txt", bob, proto.ToPeer(alice.Pub), "@alice", func(e *proto.Envelope) {
		params, _ := proto.JSONToCBOR([]byte(`{"suite":"unit"}`))
		e.Kind, e.Request = proto.KindRequest, &proto.Request{RequestID: uuid.New(), Intent: "run-tests", Params: params}
	})
	return f
}

func TestVerifyMailboxFiles(t *testing.T) {
	t.Parallel()
	f := newMVFixture(t)
	out := ok(t, "--home", f.home, "verify", f.general, f.dm, f.req)
	want := []string{
		"ok " + f.general + ": message from bob (" + f.bobFP + ", operator) to #general, signed",
		"ok " + f.dm + ": message from alice (" + f.aliceFP + ", admin) to @bob, signed",
		"ok " + f.req + ": request from bob (" + f.bobFP + ", operator) to @alice, signed",
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}

	// Without a roster or channel policies, the names are unchecked.
	out = ok(t, "--home", f.bare, "verify", f.general)
	wantBare := "ok " + f.general + ": message from bob (" + f.bobFP + ") to #general, signed; unchecked: From name (no roster), To name (no channel policies)\n"
	if out != wantBare {
		t.Errorf("output\n%s\nwant\n%s", out, wantBare)
	}

	// Standard input.
	b, _ := os.ReadFile(f.dm)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--home", f.home, "verify", "-"}, bytes.NewReader(b), &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "ok -: message from alice") {
		t.Errorf("verify -: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}

	js := decode[[]mailVerifyResult](t, ok(t, "--home", f.home, "--json", "verify", f.general))
	if len(js) != 1 || !js[0].OK || js[0].Kind != "message" || js[0].From.Name != "bob" || js[0].From.Role != "operator" ||
		js[0].To != "#general" || js[0].Priority != "normal" || len(js[0].Unsigned) != 1 || len(js[0].Unchecked) != 0 {
		t.Errorf("json %+v", js)
	}
}

func TestVerifyMailboxFailures(t *testing.T) {
	t.Parallel()
	f := newMVFixture(t)
	edit := func(path, old, new string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%q not in %s", old, path)
		}
		out := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(out, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	body := edit(f.general, "tests are green", "tests are gray!")
	intent := edit(f.req, "Intent: run-tests", "Intent: deploy")
	name := edit(f.dm, "From: alice (", "From: mallory (")
	channelName := edit(f.general, "To: #general", "To: #ops")

	r := fails(t, 1, []string{"--home", f.home, "verify", f.general, body, intent, name, channelName})
	if !strings.HasPrefix(r.stdout, "ok "+f.general+": ") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("stdout %q: want the one good file", r.stdout)
	}
	for _, want := range []string{
		"meshctl: " + body + `: body line 1 differs from the envelope: the file has "tests are gray!\n", the envelope has "tests are green\n"` + "\n",
		"meshctl: " + intent + `: header Intent: the file says "deploy", the envelope says "run-tests"` + "\n",
		"meshctl: " + name + `: sender name in header From: the file says "mallory", the roster says "alice"` + "\n",
		"meshctl: " + channelName + `: header To: the file says "#ops", the channel policy says "#general"` + "\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	// Without the roster the edited name cannot be caught, but everything
	// signed still is.
	ok(t, "--home", f.bare, "verify", name)
	fails(t, 1, []string{"--home", f.bare, "verify", intent}, "header Intent")

	js := decode[[]mailVerifyResult](t, mc(t, "--home", f.home, "--json", "verify", body, f.dm).stdout)
	if len(js) != 2 || js[0].OK || js[0].Field != "body" || !js[1].OK {
		t.Errorf("json %+v", js)
	}
	fails(t, 1, []string{"--home", f.home, "verify", filepath.Join(t.TempDir(), "missing.txt")}, "no such file")
	fails(t, 2, []string{"--home", f.home, "verify"}, "missing FILE")
}
