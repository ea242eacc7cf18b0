package proto

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fixedStatic stands in for a Noise static public key.
var fixedStatic = bytes.Repeat([]byte{0x5a}, 32)

func testPayload() *HandshakePayload {
	p := &HandshakePayload{
		Version:       ProtocolVersion,
		Org:           "acme",
		RosterVersion: 7,
		Listen:        []string{"tcp://192.0.2.10:7946", "unix:///run/meshd/meshd.sock"},
		PolicyDigest:  bytes.Repeat([]byte{0xd1}, 32),
		Name:          "alice",
	}
	p.BindStatic(keyAlice, fixedStatic)
	return p
}

func TestHandshakeBindStatic(t *testing.T) {
	p := testPayload()
	if p.Identity != alice {
		t.Fatal("BindStatic did not set the identity")
	}
	if err := p.VerifyStatic(fixedStatic); err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{0x5b}, 32)
	if err := p.VerifyStatic(other); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("other static key: %v, want ErrBadSignature", err)
	}
	// A peer that copies alice's binding but claims its own identity fails.
	q := *p
	q.Identity = bob
	if err := q.VerifyStatic(fixedStatic); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("stolen binding: %v", err)
	}
	// The binding is domain separated from envelopes.
	q = *p
	q.StaticSig = Sign(keyAlice, DomainEnvelope, fixedStatic)
	if err := q.VerifyStatic(fixedStatic); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("envelope-domain signature accepted as static binding: %v", err)
	}
	if err := Verify(alice, DomainEnvelope, fixedStatic, p.StaticSig); !errors.Is(err, ErrBadSignature) {
		t.Fatal("static binding verifies as an envelope signature")
	}
}

func TestHandshakePayloadRoundTrip(t *testing.T) {
	for _, p := range []*HandshakePayload{testPayload(), {Version: ProtocolVersion, Org: "o", Identity: bob}} {
		b, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHandshakePayload(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, p)
		}
	}
}

func TestPrologue(t *testing.T) {
	if got := string(Prologue("acme")); got != "meshd/1\x00acme" {
		t.Fatalf("Prologue = %q", got)
	}
	if bytes.Equal(Prologue("acme"), Prologue("acme2")) {
		t.Fatal("prologue does not depend on the org")
	}
}

func TestParseHandshakePayloadRejects(t *testing.T) {
	valid := testPayload()
	enc := func(edit func(*HandshakePayload)) []byte {
		p := *valid
		edit(&p)
		b, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := enc(func(*HandshakePayload) {})
	// Hand-built entries of the valid payload, to craft non-canonical forms.
	es := entries{
		{cUint(0), cUint(1)},
		{cUint(1), cBytes(alice[:])},
		{cUint(2), cBytes(valid.StaticSig[:])},
		{cUint(3), cText("acme")},
		{cUint(4), cUint(7)},
		{cUint(5), cArr(cText(valid.Listen[0]), cText(valid.Listen[1]))},
		{cUint(6), cBytes(valid.PolicyDigest)},
		{cUint(7), cText("alice")},
	}
	if !bytes.Equal(es.encode(), good) {
		t.Fatalf("hand-built payload\n %x\nencoder\n %x", es.encode(), good)
	}
	tests := []struct {
		name  string
		in    []byte
		wants []error
		is    error
	}{
		{"version 0", enc(func(p *HandshakePayload) { p.Version = 0 }), nil, ErrProtocolVersion},
		{"version 2", enc(func(p *HandshakePayload) { p.Version = 2 }), nil, ErrProtocolVersion},
		{"zero identity", enc(func(p *HandshakePayload) { p.Identity = PubKey{} }), []error{ErrMalformed}, nil},
		{"empty org", enc(func(p *HandshakePayload) { p.Org = "" }), []error{ErrMalformed}, nil},
		{"org too long", enc(func(p *HandshakePayload) { p.Org = strings.Repeat("o", MaxOrgLen+1) }), []error{ErrMalformed}, nil},
		{"too many listen addresses", enc(func(p *HandshakePayload) { p.Listen = make([]string, MaxListenAddrs+1) }), []error{ErrMalformed}, nil},
		{"listen address too long", enc(func(p *HandshakePayload) { p.Listen = []string{strings.Repeat("a", 257)} }), []error{ErrMalformed}, nil},
		{"policy digest too long", enc(func(p *HandshakePayload) { p.PolicyDigest = make([]byte, 65) }), []error{ErrMalformed}, nil},
		{"name too long", enc(func(p *HandshakePayload) { p.Name = strings.Repeat("n", 129) }), []error{ErrMalformed}, nil},
		{"too large", cCat(good, make([]byte, MaxHandshakePayload)), []error{ErrTooLarge}, nil},
		{"trailing byte", cCat(good, []byte{0}), []error{ErrMalformed}, nil},
		{"keys unsorted", es.swap(3, 4).encode(), []error{ErrNonCanonical}, nil},
		{"version non-minimal", es.set(0, cHeadWidth(mtUint, 1, 1)).encode(), []error{ErrNonCanonical}, nil},
		{"explicit empty listen", es.set(5, cArr()).encode(), []error{ErrNonCanonical}, nil},
		{"explicit empty name", es.set(7, cText("")).encode(), []error{ErrNonCanonical}, nil},
		{"unknown key", es.set(8, cUint(0)).encode(), []error{ErrMalformed}, nil},
		{"duplicate key", es.add(cUint(7), cText("x")).encode(), []error{ErrMalformed}, nil},
		{"identity 31 bytes", es.set(1, cBytes(alice[:31])).encode(), []error{ErrMalformed}, ErrBadKey},
		{"static sig 63 bytes", es.set(2, cBytes(valid.StaticSig[:63])).encode(), []error{ErrMalformed}, nil},
		{"indefinite listen", es.set(5, cCat([]byte{0x9f}, cText("x"), cBreak)).encode(), []error{ErrMalformed}, nil},
		{"listen beyond MaxArrayElements", es.set(5, repeatItems(MaxArrayElements+1, cText(""))).encode(), []error{ErrMalformed}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseHandshakePayload(tt.in)
			if p != nil || err == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if err := checkSentinels(err, tt.wants...); err != nil {
				t.Fatal(err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error %v is not %v", err, tt.is)
			}
		})
	}
	if _, err := ParseHandshakePayload(good); err != nil {
		t.Fatalf("control: %v", err)
	}
}
