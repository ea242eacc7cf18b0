package roster

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/meshd/meshd/proto"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/")

// goldenChain is the chain of rosters pinned by testdata/*.hex. Each one is
// a valid update of the one before it; v1 is a valid bootstrap.
func goldenChain(t testing.TB) []struct {
	file string
	r    *Roster
} {
	v1 := mustSign(t, &Roster{Org: "acme", Version: 1, Timestamp: t0,
		Members: []Member{{Key: pub(alice), Role: RoleAdmin, Name: "alice"}}}, alice)

	v2 := &Roster{Org: "acme", Version: 2, Timestamp: t0 + 60_000, Members: []Member{
		{Key: pub(bob), Role: RoleMember, Name: "bob"},
		{Key: pub(alice), Role: RoleAdmin, Name: "alice"},
		{Key: pub(dave), Role: RoleObserver},
		{Key: pub(carol), Role: RoleOperator, Name: "carol", Archive: true},
	}}
	mustSign(t, v2, alice)

	// v3 makes carol an admin and sets quorum 2; v2's quorum is 1, so
	// alice alone may sign it.
	v3 := v2.Next()
	v3.Timestamp = t0 + 120_000
	if err := v3.SetRole(pub(carol), RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if err := v3.SetQuorum(2); err != nil {
		t.Fatal(err)
	}
	mustSign(t, v3, alice)

	// v4 removes dave and needs both admins.
	v4 := v3.Next()
	v4.Timestamp = t0 + 180_000
	if err := v4.Remove(pub(dave)); err != nil {
		t.Fatal(err)
	}
	mustSign(t, v4, carol, alice)

	// v5 moves bob to a new key (frank's seed) and keeps his old one for
	// a day: a key rotation with a grace window.
	v5 := v4.Next()
	v5.Timestamp = t0 + 240_000
	if err := v5.Rekey(pub(bob), pub(frank), t0+240_000+86_400_000); err != nil {
		t.Fatal(err)
	}
	mustSign(t, v5, alice, carol)

	return []struct {
		file string
		r    *Roster
	}{
		{"v1-bootstrap.hex", v1},
		{"v2-members.hex", v2},
		{"v3-quorum2.hex", v3},
		{"v4-two-admins.hex", v4},
		{"v5-rekey.hex", v5},
	}
}

func TestGoldenVectors(t *testing.T) {
	var prev *Roster
	for _, g := range goldenChain(t) {
		t.Run(g.file, func(t *testing.T) {
			got := mustEncode(t, g.r)
			path := filepath.Join("testdata", g.file)
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readHex(t, g.file)
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from %s\n got %x\nwant %x", path, got, want)
			}
			parsed, err := Parse(want)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(parsed, g.r) {
				t.Fatalf("Parse = %+v, want %+v", parsed, g.r)
			}
			if again := mustEncode(t, parsed); !bytes.Equal(again, want) {
				t.Fatalf("re-encoding differs")
			}
			if prev == nil {
				if err := CheckBootstrap(parsed); err != nil {
					t.Fatalf("CheckBootstrap: %v", err)
				}
			} else if err := CheckUpdate(prev, parsed); err != nil {
				t.Fatalf("CheckUpdate(v%d, v%d): %v", prev.Version, parsed.Version, err)
			}
			prev = parsed
		})
	}
}

// TestWireForm pins the body encoding byte for byte, independently of the
// CBOR library: {0: "acme", 1: 1, 2: t0, 4: [{0: key, 1: 4, 2: "alice"}]}.
func TestWireForm(t *testing.T) {
	r := mustSign(t, &Roster{Org: "acme", Version: 1, Timestamp: t0,
		Members: []Member{{Key: pub(alice), Role: RoleAdmin, Name: "alice"}}}, alice)
	p := pub(alice)
	want := cat(
		h("a4"),                     // map, 4 pairs (quorum omitted)
		h("00 64 61636d65"),         // 0: "acme"
		h("01 01"),                  // 1: version 1
		h("02 1b 0000019b76daa800"), // 2: 1767225600000
		h("04 81"),                  // 4: array of 1 member
		h("a3 00 5820"), p[:],       // {0: bstr(32) key,
		h("01 04 02 65 616c696365"), //  1: admin, 2: "alice"}
	)
	if !bytes.Equal(r.Doc.Body, want) {
		t.Fatalf("body\n got %x\nwant %x", r.Doc.Body, want)
	}
	wire := mustEncode(t, r)
	sig := r.Doc.Sigs[0].Sig
	if len(want) < 24 || len(want) > 255 {
		t.Fatalf("test assumes a body of 24..255 bytes, got %d", len(want))
	}
	// {0: bstr body, 1: [{0: bstr(32) signer, 1: bstr(64) sig}]}
	wantWire := cat(h("a2 00 58"), []byte{byte(len(want))}, want, h("01 81 a2 00 5820"), p[:], h("01 5840"), sig[:])
	if !bytes.Equal(wire, wantWire) {
		t.Fatalf("wire\n got %x\nwant %x", wire, wantWire)
	}

	// Quorum, archive and an unnamed member, in key order.
	r2 := &Roster{Org: "o", Version: 7, Timestamp: -1, Threshold: 2, Members: []Member{
		{Key: pub(bob), Role: RoleAdmin},
		{Key: pub(alice), Role: RoleAdmin, Archive: true},
	}}
	mustSign(t, r2, alice)
	pb := pub(bob)
	want2 := cat(h("a5 00 61 6f 01 07 02 20 03 02 04 82"),
		h("a2 00 5820"), pb[:], h("01 04"),
		h("a3 00 5820"), p[:], h("01 04 03 f5"))
	if !bytes.Equal(r2.Doc.Body, want2) {
		t.Fatalf("body\n got %x\nwant %x", r2.Doc.Body, want2)
	}
}

// rejectVectors are roster documents that every implementation must
// refuse, pinned in testdata/reject-*.hex. Each is signed correctly by
// its one admin, so only the body is at fault.
func rejectVectors(t testing.TB) []struct {
	file string
	doc  []byte
} {
	// explicitQuorum mirrors wireRoster without omitempty on quorum.
	type explicitQuorum struct {
		Org       string       `cbor:"0,keyasint"`
		Version   uint64       `cbor:"1,keyasint"`
		Timestamp int64        `cbor:"2,keyasint"`
		Quorum    uint32       `cbor:"3,keyasint"`
		Members   []wireMember `cbor:"4,keyasint"`
	}
	build := func(q uint32) []byte {
		body, err := proto.Marshal(&explicitQuorum{Org: "acme", Version: 1, Timestamp: t0, Quorum: q,
			Members: []wireMember{{Key: pub(alice), Role: uint8(RoleAdmin), Name: "alice"}}})
		if err != nil {
			t.Fatal(err)
		}
		d := &proto.SignedDoc{Body: body}
		d.AddSignature(alice, proto.DomainRoster)
		b, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []struct {
		file string
		doc  []byte
	}{
		{"reject-quorum-1.hex", build(1)},
		{"reject-quorum-0.hex", build(0)},
	}
}

// TestRejectVectors: a quorum of 1 has one encoding, the absent key 3.
// Writing 3: 1 (or 3: 0) is a second encoding and is refused.
func TestRejectVectors(t *testing.T) {
	for _, v := range rejectVectors(t) {
		t.Run(v.file, func(t *testing.T) {
			if *update {
				if err := os.WriteFile(filepath.Join("testdata", v.file), []byte(hex.EncodeToString(v.doc)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readHex(t, v.file)
			if !bytes.Equal(v.doc, want) {
				t.Fatalf("generated document differs from %s\n got %x\nwant %x", v.file, v.doc, want)
			}
			if _, err := Parse(want); !errors.Is(err, proto.ErrNonCanonical) {
				t.Fatalf("Parse: %v, want ErrNonCanonical", err)
			}
		})
	}
	// The encoder never writes quorum 1, even when asked to.
	r := mustSign(t, &Roster{Org: "acme", Version: 1, Timestamp: t0, Threshold: 1,
		Members: []Member{{Key: pub(alice), Role: RoleAdmin, Name: "alice"}}}, alice)
	got, err := Parse(mustEncode(t, r))
	if err != nil {
		t.Fatalf("roster with Threshold 1 does not load: %v", err)
	}
	if got.Quorum() != 1 || bytes.Contains(r.Doc.Body, []byte{0x03, 0x01, 0x04}) {
		t.Fatalf("quorum 1 encoded explicitly: body %x", r.Doc.Body)
	}
}
