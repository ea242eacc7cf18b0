package proto

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Sizes of an invite's id and secret.
const (
	InviteIDLen     = 8
	InviteSecretLen = 32
)

// InviteTokenPrefix starts the text form of an [InviteToken].
const InviteTokenPrefix = "meshinv1:"

// MaxInviteToken bounds the text form of an [InviteToken].
const MaxInviteToken = 4 << 10

// ErrBadInvite reports an invite token or invite proof that does not parse.
var ErrBadInvite = errors.New("invalid invite")

// InviteProof is what a joiner that is not yet a member presents in its
// handshake payload (field 8): the id of the invite an admin's node made
// and its single-use secret. It travels only in handshake message 3,
// encrypted to the responder whose identity the joiner checked in
// message 2, so only the inviting node sees the secret.
//
// Wire: {0: bstr(8) id, 1: bstr(32) secret}.
type InviteProof struct {
	ID     []byte `cbor:"0,keyasint"`
	Secret []byte `cbor:"1,keyasint"`
}

// String names the invite without its secret, so that printing a payload
// never leaks it.
func (p *InviteProof) String() string {
	if p == nil {
		return "<no invite>"
	}
	return "invite " + hex.EncodeToString(p.ID)
}

func (p *InviteProof) check() error {
	if len(p.ID) != InviteIDLen || len(p.Secret) != InviteSecretLen {
		return fmt.Errorf("%w: invite id of %d bytes and secret of %d bytes, want %d and %d",
			ErrMalformed, len(p.ID), len(p.Secret), InviteIDLen, InviteSecretLen)
	}
	return nil
}

// InviteToken is everything a new node needs to join an org: where to
// reach the inviting node, which key it must answer with, and the invite
// to present. Its text form ([InviteToken.String]) is one line that the
// admin hands to the new node's operator; it is a secret until used.
//
// Wire: {0: text org, 1: bstr(32) admin key, 2: [+ text admin address],
// ?3: [* text other member address], 4: bstr(8) invite id,
// 5: bstr(32) secret, 6: uint expiry (Unix seconds), ?7: text name,
// 8: text role, ?9: uint quorum of the roster}.
type InviteToken struct {
	Org     string   `cbor:"0,keyasint"`
	Admin   PubKey   `cbor:"1,keyasint"`
	Addrs   []string `cbor:"2,keyasint"`
	Seeds   []string `cbor:"3,keyasint,omitempty"`
	ID      []byte   `cbor:"4,keyasint"`
	Secret  []byte   `cbor:"5,keyasint"`
	Expires uint64   `cbor:"6,keyasint"`
	Name    string   `cbor:"7,keyasint,omitempty"`
	Role    string   `cbor:"8,keyasint"`
	// Quorum is the roster's quorum when the invite was made: above 1,
	// the joiner waits for the other admins to sign the update. 0 (key 9
	// absent) means 1; a token made by an earlier meshd carries 9: 1,
	// which parses as 1.
	Quorum uint64 `cbor:"9,keyasint,omitempty"`
}

// Proof returns the proof the joiner presents for t.
func (t *InviteToken) Proof() *InviteProof {
	return &InviteProof{ID: append([]byte(nil), t.ID...), Secret: append([]byte(nil), t.Secret...)}
}

// String returns the one-line text form: [InviteTokenPrefix] and the
// base64url (no padding) of the canonical CBOR. A quorum of 1 is the
// default and leaves key 9 out (PROTOCOL.md §14.9).
func (t *InviteToken) String() string {
	c := *t
	if c.Quorum == 1 {
		c.Quorum = 0
	}
	b, err := Marshal(&c)
	if err != nil {
		return ""
	}
	return InviteTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseInviteToken parses the text form of an invite token strictly and
// checks its limits. Surrounding white space is ignored, so a token
// pasted with its newline parses.
func ParseInviteToken(s string) (*InviteToken, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxInviteToken {
		return nil, fmt.Errorf("%w: token of %d bytes exceeds %d", ErrBadInvite, len(s), MaxInviteToken)
	}
	rest, ok := strings.CutPrefix(s, InviteTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: a token starts with %q", ErrBadInvite, InviteTokenPrefix)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (was the token cut when copied?)", ErrBadInvite, err)
	}
	var t InviteToken
	if err := UnmarshalCanonical(b, &t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInvite, err)
	}
	if t.Org == "" || len(t.Org) > MaxOrgLen || !printable(t.Org) {
		return nil, fmt.Errorf("%w: org id must be 1..%d printable bytes", ErrBadInvite, MaxOrgLen)
	}
	if t.Admin.IsZero() {
		return nil, fmt.Errorf("%w: zero admin key", ErrBadInvite)
	}
	if len(t.Addrs) == 0 || len(t.Addrs) > MaxListenAddrs || len(t.Seeds) > MaxListenAddrs {
		return nil, fmt.Errorf("%w: 1..%d admin addresses and at most %d others", ErrBadInvite, MaxListenAddrs, MaxListenAddrs)
	}
	for _, a := range append(append([]string(nil), t.Addrs...), t.Seeds...) {
		if err := CheckListenAddr(a); err != nil {
			return nil, fmt.Errorf("%w: address %q: %v", ErrBadInvite, a, err)
		}
	}
	if err := (&InviteProof{ID: t.ID, Secret: t.Secret}).check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInvite, err)
	}
	if len(t.Name) > 128 || !printable(t.Name) || len(t.Role) > 16 || !printable(t.Role) {
		return nil, fmt.Errorf("%w: bad name or role", ErrBadInvite)
	}
	return &t, nil
}
