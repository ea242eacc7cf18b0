package join

import (
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// vectorField reads one field of a stored test vector.
func vectorField(t *testing.T, file, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vectors", file))
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
	t.Parallel()
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
	if FreshRoster(r, proto.PubKeyOf(self)) == nil {
		t.Fatal("a new one-node org is not fresh")
	}
	next := r.Next()
	if err := next.Add(roster.Member{Key: proto.PubKeyOf(other), Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := next.Sign(self); err != nil {
		t.Fatal(err)
	}
	if FreshRoster(next, proto.PubKeyOf(self)) != nil {
		t.Fatal("a two-member org is fresh")
	}
	if FreshRoster(r, proto.PubKeyOf(other)) != nil {
		t.Fatal("another node's one-node org is fresh for us")
	}
	signed := r.Next()
	if err := signed.Sign(other); err != nil {
		t.Fatal(err)
	}
	if FreshRoster(signed, proto.PubKeyOf(self)) != nil {
		t.Fatal("a roster someone else signed is fresh")
	}
}

// TestParseAdminFingerprint: a key or a fingerprint is taken; an org id
// is refused with why.
func TestParseAdminFingerprint(t *testing.T) {
	t.Parallel()
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

// TestConsiderAdoptionRefuses: a roster offered in a knock is refused,
// and counted by reason, when it does not decode, is not the responder's
// org or does not list it, is not signed by its own admins, or came over
// an mDNS-found link with no admin confirmed; confirmed by the admin's
// fingerprint, the same offer is adopted, once.
func TestConsiderAdoptionRefuses(t *testing.T) {
	t.Parallel()
	admin, self := newKey(t), newKey(t)
	// This node has a one-node org of its own; acme lists it as a member.
	h := newFakeHost(t, self, nil)
	k := NewKnocks(h, Config{Home: t.TempDir()})
	acme := acmeRoster(t, admin, self)
	peer := &proto.HandshakePayload{Identity: proto.PubKeyOf(admin), Org: "acme"}
	mdns := transport.Addr{Network: "tcp", Address: "192.0.2.1:7437"}
	good, err := acme.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Listing this node, signed by this node (a member, not an admin).
	forged := acme.Next()
	if err := forged.Sign(self); err != nil {
		t.Fatal(err)
	}
	forgedB, err := forged.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reason string
		peer   *proto.HandshakePayload
		b      []byte
	}{
		{adoptMalformed, peer, []byte{0xa0}},
		{adoptMismatch, &proto.HandshakePayload{Identity: proto.PubKeyOf(admin), Org: "other"}, good},
		{adoptMismatch, &proto.HandshakePayload{Identity: proto.PubKeyOf(newKey(t)), Org: "acme"}, good},
		{adoptSignature, peer, forgedB},
		{adoptUnconfirm, peer, good},
	}
	for _, c := range cases {
		before := h.reasons(AdoptRefused, c.reason)
		k.considerAdoption(mdns, viaMDNS, c.peer, c.b)
		if h.reasons(AdoptRefused, c.reason) != before+1 {
			t.Fatalf("offer refused as %q: counted %d", c.reason, h.reasons(AdoptRefused, c.reason))
		}
	}
	select {
	case ad := <-k.Adopted():
		t.Fatalf("adopted %v", ad.Roster)
	default:
	}
	if _, err := k.Adopt(api.AdoptRequest{Fingerprint: proto.PubKeyOf(admin).Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	k.considerAdoption(mdns, viaMDNS, peer, good)
	select {
	case ad := <-k.Adopted():
		if ad.Roster.Org != "acme" || ad.From != mdns.String() || ad.Left != "org-"+proto.PubKeyOf(self).Fingerprint() {
			t.Fatalf("adoption %+v", ad)
		}
	default:
		t.Fatal("a confirmed admin's roster was not adopted")
	}
	k.considerAdoption(mdns, viaMDNS, peer, good)
	if got := h.count(AdoptAdopted); got != 1 {
		t.Fatalf("adopted %d times", got)
	}
	h.wait() // the knocks Adopt started again
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
