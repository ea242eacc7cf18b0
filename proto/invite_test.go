package proto

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
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
