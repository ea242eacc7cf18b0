package proto

import (
	"bytes"
	"testing"
)

// freshRosterWire is the roster body (roster package, PROTOCOL.md §7) as
// the knock vector spells it out by hand: proto cannot import roster.
type freshRosterWire struct {
	Org       string              `cbor:"0,keyasint"`
	Version   uint64              `cbor:"1,keyasint"`
	Timestamp int64               `cbor:"2,keyasint"`
	Members   []freshRosterMember `cbor:"4,keyasint"`
}

type freshRosterMember struct {
	Key  PubKey `cbor:"0,keyasint"`
	Role uint8  `cbor:"1,keyasint"`
	Name string `cbor:"2,keyasint,omitempty"`
}

// knockVector is bob knocking as a fresh node (PROTOCOL.md §14.11): his
// payload in message 3, with his one-node org's roster as field 9.
func knockVector(t testing.TB) vector {
	body, err := Marshal(&freshRosterWire{Org: "org-" + bob.Fingerprint(), Version: 1, Timestamp: 1767225600000,
		Members: []freshRosterMember{{Key: bob, Role: 4, Name: "laptop"}}})
	if err != nil {
		t.Fatal(err)
	}
	doc := &SignedDoc{Body: body}
	doc.AddSignature(keyBob, DomainRoster)
	fresh, err := doc.Encode()
	if err != nil {
		t.Fatal(err)
	}
	hs := &HandshakePayload{Version: ProtocolVersion, Org: "org-" + bob.Fingerprint(), RosterVersion: 1, Name: "laptop", Fresh: fresh}
	hs.BindStatic(keyBob, fixedStatic)
	raw, err := hs.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return vector{
		file: "16-handshake-knock.txt", title: "HandshakePayload of a fresh node knocking", hs: hs,
		notes: []string{
			"bob knocks (PROTOCOL.md 14.11): his org is his own one-node org \"org-<his fingerprint>\", roster_version 1,",
			"  name \"laptop\", no listen; fresh (field 9) is that org's roster: bob the only member (admin),",
			"  timestamp 1767225600000, signed by bob alone under the roster domain",
			"prologue is the knock prologue (an empty org); marker is handshake message 1's cleartext payload",
		},
		fields: []vecField{
			{"seed", seedOf(keyBob)},
			{"pubkey", bob[:]},
			{"domain", []byte(DomainNoiseStatic)},
			{"signed", fixedStatic},
			{"signing_input", SigningInput(DomainNoiseStatic, fixedStatic)},
			{"sig", hs.StaticSig[:]},
			{"prologue", KnockPrologue()},
			{"marker", KnockMarker},
			{"fresh", fresh},
			{"raw", raw},
		},
	}
}

// TestKnockPrologueIsNoOrgs: no org id gives the knock prologue.
func TestKnockPrologueIsNoOrgs(t *testing.T) {
	if got := string(KnockPrologue()); got != "meshd/1\x00" {
		t.Fatalf("KnockPrologue = %q", got)
	}
	for _, org := range []string{"a", "acme", "\x00"} {
		if bytes.Equal(Prologue(org), KnockPrologue()) {
			t.Fatalf("org %q has the knock prologue", org)
		}
	}
	p := testPayload()
	p.Fresh = bytes.Repeat([]byte{1}, MaxFreshRoster+1)
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHandshakePayload(b); err == nil {
		t.Fatal("a fresh roster over the bound was accepted")
	}
}
