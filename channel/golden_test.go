package channel

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
	"github.com/meshd/meshd/roster"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/")

// goldenVectors are the policies pinned by testdata/*.hex.
func goldenVectors(t testing.TB) []struct {
	file string
	p    *Policy
} {
	// The defaults of New: every member reads, members and up write.
	general := testPolicy(idGeneral, "general")
	general.AllowHistory = true
	mustSign(t, general, alice)

	// Key and role principals, two channel admins, custom retention,
	// history fetch disabled, signed by both admins.
	deploys := &Policy{
		ID:   idDeploys,
		Name: "deploys",
		ReadACL: []Principal{
			RolePrincipal(roster.RoleOperator), KeyPrincipal(pub(dave)), KeyPrincipal(pub(bob)),
		},
		WriteACL:          []Principal{KeyPrincipal(pub(bob)), RolePrincipal(roster.RoleOperator)},
		Admins:            []proto.PubKey{pub(carol), pub(alice)},
		RetentionHours:    24,
		RetentionMessages: 500,
		Version:           3,
		Timestamp:         t0 + 120_000,
		Org:               "acme",
	}
	mustSign(t, deploys, carol, alice)

	// The tombstone that deletes general: version 2, no readers, no
	// writers, history fetch off, signed by alice.
	tomb := testPolicy(idGeneral, "general")
	tomb.ReadACL, tomb.WriteACL = []Principal{}, []Principal{}
	tomb.Version, tomb.Timestamp = 2, t0+60_000
	mustSign(t, tomb, alice)

	return []struct {
		file string
		p    *Policy
	}{
		{"policy-general.hex", general},
		{"policy-deploys.hex", deploys},
		{"policy-general-deleted.hex", tomb},
	}
}

func TestGolden(t *testing.T) {
	r := testRoster(t)
	for _, v := range goldenVectors(t) {
		t.Run(v.file, func(t *testing.T) {
			b := mustEncode(t, v.p)
			path := filepath.Join("testdata", v.file)
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readHex(t, v.file)
			if !bytes.Equal(b, want) {
				t.Fatalf("encoding changed:\n got %x\nwant %x\n(run go test -update after a deliberate change)", b, want)
			}
			p := mustParse(t, want)
			if !reflect.DeepEqual(p, v.p) {
				t.Fatalf("parsed %+v\nwant %+v", p, v.p)
			}
			if again := mustEncode(t, p); !bytes.Equal(again, want) {
				t.Fatalf("re-encoding differs")
			}
			if err := Check(r, p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGoldenBody pins the body of the deploys vector against an encoding
// built by hand from the wire spec in the package doc.
func TestGoldenBody(t *testing.T) {
	p := mustParse(t, readHex(t, "policy-deploys.hex"))
	want := cmap(fullFields()...)
	if !bytes.Equal(p.Doc.Body, want) {
		t.Fatalf("body\n got %x\nwant %x", p.Doc.Body, want)
	}
	if p.Doc.Sigs[0].Signer != pub(alice) || p.Doc.Sigs[1].Signer != pub(carol) || len(p.Doc.Sigs) != 2 {
		t.Fatalf("signers %v", p.Signers())
	}
	for _, s := range p.Doc.Sigs {
		if err := proto.Verify(s.Signer, "meshd/policy/v1\x00", want, s.Sig); err != nil {
			t.Fatal(err)
		}
	}
	// The general vector spelled out byte by byte: the smallest policy.
	g := mustParse(t, readHex(t, "policy-general.hex"))
	wantG := h(`ab                                      # map(11)
		00 50 019b76daa80070008000000000000001  # 0: channel id
		01 67 67656e6572616c                    # 1: "general"
		02 81 a1 01 01                          # 2: [{1: observer}]
		03 81 a1 01 02                          # 3: [{1: member}]
		04 81 58 20` + hex.EncodeToString(cpub(alice)[2:]) + ` # 4: [alice]
		05 f5                                   # 5: true
		06 00                                   # 6: 0 (72 h)
		07 00                                   # 7: 0 (10,000)
		08 01                                   # 8: version 1
		09 1b 0000019b76daa800                  # 9: t0
		0a 64 61636d65                          # 10: "acme"`)
	if !bytes.Equal(g.Doc.Body, wantG) {
		t.Fatalf("general body\n got %x\nwant %x", g.Doc.Body, wantG)
	}
}

// TestTombstoneVector checks that the tombstone vector is what
// [Policy.Tombstone] makes of the general vector, and reads as deleted.
func TestTombstoneVector(t *testing.T) {
	g := mustParse(t, readHex(t, "policy-general.hex"))
	d := mustParse(t, readHex(t, "policy-general-deleted.hex"))
	if g.Deleted() || !d.Deleted() {
		t.Fatalf("deleted: general %v, tombstone %v", g.Deleted(), d.Deleted())
	}
	tb := g.Tombstone()
	tb.Timestamp = d.Timestamp
	mustSign(t, tb, alice)
	if !bytes.Equal(tb.Doc.Body, d.Doc.Body) {
		t.Fatalf("Tombstone body\n got %x\nwant %x", tb.Doc.Body, d.Doc.Body)
	}
	s := NewSet()
	r := testRoster(t)
	if _, err := s.Merge(r, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(r, g); !errors.Is(err, ErrRollback) {
		t.Fatalf("v1 after the tombstone: %v, want a rollback", err)
	}
}
