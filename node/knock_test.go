package node

import (
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// vectorField reads one field of a stored test vector.
func vectorField(t *testing.T, file, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			out, err := hex.DecodeString(v)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("%s has no field %s", file, name)
	return nil
}

// TestCheckFreshVector: the knock vector's payload proves a fresh node; a
// payload whose org differs from its roster's, or whose roster is not its
// own one-node org, does not.
func TestCheckFreshVector(t *testing.T) {
	p, err := proto.ParseHandshakePayload(vectorField(t, "16-handshake-knock.txt", "raw"))
	if err != nil {
		t.Fatal(err)
	}
	p.Knock = true
	if !checkFresh(p) {
		t.Fatal("the knock vector does not prove a fresh node")
	}
	q := *p
	q.Org = "acme"
	if checkFresh(&q) {
		t.Fatal("fresh with another org than its roster's")
	}
	_, other, _ := ed25519.GenerateKey(nil)
	q = *p
	q.Identity = proto.PubKeyOf(other)
	if checkFresh(&q) {
		t.Fatal("fresh with another node's one-node roster")
	}
	// Two members, or a one-member roster someone else signed: not fresh.
	_, self, _ := ed25519.GenerateKey(nil)
	r, err := roster.New("org-x", self, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if freshRoster(r, proto.PubKeyOf(self)) == nil {
		t.Fatal("a new one-node org is not fresh")
	}
	next := r.Next()
	if err := next.Add(roster.Member{Key: proto.PubKeyOf(other), Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := next.Sign(self); err != nil {
		t.Fatal(err)
	}
	if freshRoster(next, proto.PubKeyOf(self)) != nil {
		t.Fatal("a two-member org is fresh")
	}
	if freshRoster(r, proto.PubKeyOf(other)) != nil {
		t.Fatal("another node's one-node org is fresh for us")
	}
	signed := r.Next()
	if err := signed.Sign(other); err != nil {
		t.Fatal(err)
	}
	if freshRoster(signed, proto.PubKeyOf(self)) != nil {
		t.Fatal("a roster someone else signed is fresh")
	}
}

// TestParseAdminFingerprint: a key or a fingerprint is taken; an org id
// is refused with why.
func TestParseAdminFingerprint(t *testing.T) {
	_, k, _ := ed25519.GenerateKey(nil)
	pub := proto.PubKeyOf(k)
	for _, in := range []string{pub.String(), pub.Fingerprint(), strings.ToUpper(pub.Fingerprint())} {
		if fp, err := parseAdminFingerprint(in); err != nil || fp != pub.Fingerprint() {
			t.Fatalf("%q: %q, %v", in, fp, err)
		}
	}
	for _, in := range []string{"acme", "", "0123456789abcdeg", "0123456789abcde"} {
		if _, err := parseAdminFingerprint(in); err == nil || !strings.Contains(err.Error(), "any node on the LAN") {
			t.Fatalf("%q: %v", in, err)
		}
	}
}
