package proto

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"unicode"
)

// ProtocolVersion is the link protocol version. It is part of the Noise
// prologue, so nodes of different versions fail the handshake cleanly.
const ProtocolVersion = 1

// ErrProtocolVersion is wrapped when a peer speaks another
// [ProtocolVersion].
var ErrProtocolVersion = errors.New("unsupported protocol version")

// MaxHandshakePayload bounds the payload inside one Noise handshake message.
const MaxHandshakePayload = 8 << 10

// Prologue returns the Noise prologue: "meshd/<version>\x00<org id>". Both
// sides must agree on it, so a node of another org or protocol version
// fails the handshake before any payload is read.
func Prologue(org string) []byte {
	return []byte(fmt.Sprintf("meshd/%d\x00%s", ProtocolVersion, org))
}

// KnockPrologue is the Noise prologue of a knock (PROTOCOL.md §14.11):
// "meshd/<version>\x00" with an empty org id, which no org can have, so a
// knock never completes against an ordinary handshake nor the reverse.
// A node that does not know a peer's org knocks to learn it and to be
// listed in that peer's pending list.
func KnockPrologue() []byte { return Prologue("") }

// KnockMarker is the cleartext payload of a knock's handshake message 1:
// it tells the responder to use [KnockPrologue].
var KnockMarker = []byte("meshd-knock")

// MaxFreshRoster bounds the roster a fresh node sends in a knock
// (HandshakePayload.Fresh): a one-member roster is about 200 bytes.
const MaxFreshRoster = 1024

// HandshakePayload is what each side sends inside its Noise XX handshake
// message. It binds the Noise static key to the Ed25519 identity with
// StaticSig, a signature over DomainNoiseStatic || noise static public key
// (the libp2p noise construction).
//
// Wire: {0: version, 1: bstr(32) identity, 2: bstr(64) static_sig,
// 3: text org, 4: roster_version, ?5: [* text listen address],
// ?6: bstr policy digest, ?7: text name, ?8: invite proof,
// ?9: bstr fresh roster}.
//
// Invite (field 8, an [InviteProof]) is sent only by a joiner that is not
// yet a member, in message 3; a member never sends it.
//
// Fresh (field 9) is sent only in message 3 of a knock, by a node whose
// roster is a one-node org of its own: that roster's encoding, which the
// responder checks to list the knocking node as fresh.
type HandshakePayload struct {
	Version       uint32       `cbor:"0,keyasint"`
	Identity      PubKey       `cbor:"1,keyasint"`
	StaticSig     Signature    `cbor:"2,keyasint"`
	Org           string       `cbor:"3,keyasint"`
	RosterVersion uint64       `cbor:"4,keyasint"`
	Listen        []string     `cbor:"5,keyasint,omitempty"`
	PolicyDigest  []byte       `cbor:"6,keyasint,omitempty"`
	Name          string       `cbor:"7,keyasint,omitempty"`
	Invite        *InviteProof `cbor:"8,keyasint,omitempty"`
	Fresh         []byte       `cbor:"9,keyasint,omitempty"`

	// IgnoredListen counts the addresses [ParseHandshakePayload] left out
	// of Listen because they fail [CheckListenAddr]. It never travels.
	IgnoredListen int `cbor:"-"`
	// Remote is the address the connection came from, as the transport
	// saw it, for the admission hook's records. It never travels.
	Remote string `cbor:"-"`
	// Knock is set by the transport on a payload that came in a knock
	// handshake (see [KnockPrologue]). It never travels.
	Knock bool `cbor:"-"`
}

// MaxListenAddrs bounds the listen addresses a peer may announce.
const MaxListenAddrs = 16

// BindStatic sets Identity and StaticSig so the payload proves that key
// owns the Noise static public key static.
func (p *HandshakePayload) BindStatic(key ed25519.PrivateKey, static []byte) {
	p.Identity = PubKeyOf(key)
	p.StaticSig = Sign(key, DomainNoiseStatic, static)
}

// VerifyStatic checks that the payload's identity signed static.
func (p *HandshakePayload) VerifyStatic(static []byte) error {
	if err := Verify(p.Identity, DomainNoiseStatic, static, p.StaticSig); err != nil {
		return fmt.Errorf("identity does not own the noise static key: %w", err)
	}
	return nil
}

// Encode returns the canonical CBOR of p.
func (p *HandshakePayload) Encode() ([]byte, error) { return Marshal(p) }

// ParseHandshakePayload decodes a payload strictly and checks its limits.
// Listen keeps only the addresses that pass [CheckListenAddr]; the others
// are counted in IgnoredListen.
func ParseHandshakePayload(b []byte) (*HandshakePayload, error) {
	if len(b) > MaxHandshakePayload {
		return nil, fmt.Errorf("handshake payload of %d bytes: %w (limit %d)", len(b), ErrTooLarge, MaxHandshakePayload)
	}
	var p HandshakePayload
	if err := UnmarshalCanonical(b, &p); err != nil {
		return nil, fmt.Errorf("handshake payload: %w", err)
	}
	if p.Version != ProtocolVersion {
		return nil, fmt.Errorf("handshake payload: %w %d, want %d", ErrProtocolVersion, p.Version, ProtocolVersion)
	}
	if p.Identity.IsZero() {
		return nil, fmt.Errorf("handshake payload: %w: zero identity", ErrMalformed)
	}
	if p.Org == "" || len(p.Org) > MaxOrgLen {
		return nil, fmt.Errorf("handshake payload: %w: org id must be 1..%d bytes", ErrMalformed, MaxOrgLen)
	}
	if len(p.Listen) > MaxListenAddrs {
		return nil, fmt.Errorf("handshake payload: %w: %d listen addresses exceed %d", ErrMalformed, len(p.Listen), MaxListenAddrs)
	}
	for _, a := range p.Listen {
		if len(a) > MaxListenAddrLen {
			return nil, fmt.Errorf("handshake payload: %w: listen address longer than %d bytes", ErrMalformed, MaxListenAddrLen)
		}
	}
	if len(p.PolicyDigest) > 64 || len(p.Name) > 128 {
		return nil, fmt.Errorf("handshake payload: %w: policy digest or name too long", ErrMalformed)
	}
	if len(p.Fresh) > MaxFreshRoster {
		return nil, fmt.Errorf("handshake payload: %w: fresh roster of %d bytes exceeds %d", ErrMalformed, len(p.Fresh), MaxFreshRoster)
	}
	if p.Invite != nil {
		if err := p.Invite.check(); err != nil {
			return nil, fmt.Errorf("handshake payload: %w", err)
		}
	}
	if !printable(p.Name) || !printable(p.Org) {
		return nil, fmt.Errorf("handshake payload: %w: control character in name or org", ErrMalformed)
	}
	// An address this node cannot use (another scheme, a bad host or
	// port) is skipped, not fatal: the link does not depend on it, and a
	// later protocol may add address forms.
	if p.Listen, p.IgnoredListen = filterListenAddrs(p.Listen); len(p.Listen) == 0 {
		p.Listen = nil
	}
	return &p, nil
}

// printable reports whether s has no control characters, so it can be
// logged and written into mailbox headers without forging lines.
func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
