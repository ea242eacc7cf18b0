package proto

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func testToken() *InviteToken {
	return &InviteToken{Org: "acme", Admin: PubKeyOf(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))),
		Addrs: []string{"tcp://192.0.2.10:7946"}, Seeds: []string{"tcp://192.0.2.11:7946"},
		ID: bytes.Repeat([]byte{0x1d}, InviteIDLen), Secret: bytes.Repeat([]byte{0x5e}, InviteSecretLen),
		Expires: 1893456000, Name: "dave", Role: "member"}
}

func TestInviteTokenRoundTrip(t *testing.T) {
	tok := testToken()
	s := tok.String()
	if !strings.HasPrefix(s, InviteTokenPrefix) || strings.ContainsAny(s, " \n=") {
		t.Fatalf("token text %q", s)
	}
	got, err := ParseInviteToken("  " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != s || got.Org != "acme" || got.Name != "dave" || !bytes.Equal(got.Secret, tok.Secret) {
		t.Fatalf("round trip: %+v", got)
	}
	if p := got.Proof(); p.String() != "invite 1d1d1d1d1d1d1d1d" || strings.Contains(p.String(), "5e5e") {
		t.Fatalf("proof text %q", p.String())
	}
}

func TestInviteTokenRejects(t *testing.T) {
	mut := func(f func(*InviteToken)) string {
		tok := testToken()
		f(tok)
		b, err := Marshal(tok)
		if err != nil {
			t.Fatal(err)
		}
		return InviteTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	}
	cases := map[string]string{
		"no prefix":      strings.TrimPrefix(testToken().String(), InviteTokenPrefix),
		"cut":            testToken().String()[:40],
		"padding":        testToken().String() + "=",
		"too long":       InviteTokenPrefix + strings.Repeat("A", MaxInviteToken),
		"no org":         mut(func(t *InviteToken) { t.Org = "" }),
		"zero admin":     mut(func(t *InviteToken) { t.Admin = PubKey{} }),
		"no address":     mut(func(t *InviteToken) { t.Addrs = nil }),
		"bad address":    mut(func(t *InviteToken) { t.Addrs = []string{"tcp://0.0.0.0:1"} }),
		"short secret":   mut(func(t *InviteToken) { t.Secret = t.Secret[:16] }),
		"long id":        mut(func(t *InviteToken) { t.ID = append(t.ID, 0) }),
		"control in org": mut(func(t *InviteToken) { t.Org = "a\nb" }),
	}
	for name, s := range cases {
		if _, err := ParseInviteToken(s); !errors.Is(err, ErrBadInvite) {
			t.Errorf("%s: %v, want ErrBadInvite", name, err)
		}
	}
}

func TestHandshakePayloadInviteSizes(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	for _, p := range []*InviteProof{
		{ID: make([]byte, InviteIDLen-1), Secret: make([]byte, InviteSecretLen)},
		{ID: make([]byte, InviteIDLen), Secret: make([]byte, InviteSecretLen+1)},
		{},
	} {
		hs := &HandshakePayload{Version: ProtocolVersion, Org: "acme", Invite: p}
		hs.BindStatic(key, bytes.Repeat([]byte{0x5a}, 32))
		raw, err := hs.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseHandshakePayload(raw); !errors.Is(err, ErrMalformed) {
			t.Errorf("invite %d/%d bytes: %v, want ErrMalformed", len(p.ID), len(p.Secret), err)
		}
	}
}

// FuzzParseInviteToken: whatever text is pasted, parsing never panics, and
// a token it accepts prints back to the same text.
func FuzzParseInviteToken(f *testing.F) {
	f.Add(testToken().String())
	f.Add(InviteTokenPrefix)
	f.Add(InviteTokenPrefix + "oAA")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseInviteToken(s)
		if err != nil {
			return
		}
		if tok.String() != strings.TrimSpace(s) {
			t.Fatalf("accepted %q, prints back as %q", s, tok.String())
		}
		if _, err := ParseInviteToken(tok.String()); err != nil {
			t.Fatalf("printed token does not parse: %v", err)
		}
	})
}

// TestInviteTokenQuorumKey: a quorum of 1 is the default and is left out
// (PROTOCOL.md §14.9), so a token of a quorum-1 roster has one byte form;
// a quorum of 2 is written as 9: 2. A token an earlier meshd made, with
// 9: 1, still parses, as quorum 1; 9: 0 is not canonical and is refused.
func TestInviteTokenQuorumKey(t *testing.T) {
	tok := testToken()
	tok.Quorum = 1
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok.String(), InviteTokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	// The token of the vector in PROTOCOL.md §14.9: keys 0 to 8, no key 9.
	const want = "a900646163" + "6d65" + "015820" + "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c" +
		"0281" + "75" + "7463703a2f2f3139322e302e322e31303a37393436" +
		"0381" + "75" + "7463703a2f2f3139322e302e322e31313a37393436" +
		"0448" + "1d1d1d1d1d1d1d1d" + "055820" + "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e" +
		"061a70dbd880" + "0764" + "64617665" + "0866" + "6d656d626572"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("quorum-1 token:\n got %s\nwant %s", got, want)
	}
	if p, err := ParseInviteToken(tok.String()); err != nil || p.Quorum != 0 {
		t.Fatalf("parsed: %v, quorum %d", err, p.Quorum)
	}
	enc := func(q uint64) string {
		c := *testToken()
		c.Quorum = q
		raw, err := Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		return InviteTokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	}
	if tok.Quorum = 2; !strings.HasSuffix(hex.EncodeToString(mustTokenBytes(t, tok.String())), "0902") {
		t.Fatal("quorum 2 is not written as 9: 2")
	}
	old := enc(1) // as an earlier meshd wrote it: 9: 1
	if !strings.HasSuffix(hex.EncodeToString(mustTokenBytes(t, old)), "0901") {
		t.Fatal("the earlier form lacks 9: 1")
	}
	if p, err := ParseInviteToken(old); err != nil || p.Quorum != 1 {
		t.Fatalf("a token with 9: 1: %v, quorum %d", err, p.Quorum)
	}
	// 9: 0, hand-made: the key's zero value is not canonical.
	zero := append(mustTokenBytes(t, testToken().String()), 0x09, 0x00)
	zero[0]++ // one more map pair
	if _, err := ParseInviteToken(InviteTokenPrefix + base64.RawURLEncoding.EncodeToString(zero)); !errors.Is(err, ErrBadInvite) {
		t.Fatalf("9: 0 accepted: %v", err)
	}
}

func mustTokenBytes(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, InviteTokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
