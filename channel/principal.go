package channel

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// RolePrefix is the prefix of the text form of a role principal.
const RolePrefix = "role:"

// Principal is one entry of a reader or writer list: either one key or
// every member whose role is at least MinRole. Exactly one of the two is
// set.
//
// Wire: {0: bstr(32) pubkey} or {1: uint min_role}.
type Principal struct {
	Key     proto.PubKey
	MinRole roster.Role
}

// KeyPrincipal returns the principal of one key.
func KeyPrincipal(k proto.PubKey) Principal { return Principal{Key: k} }

// RolePrincipal returns the principal of every member with role r or higher.
func RolePrincipal(r roster.Role) Principal { return Principal{MinRole: r} }

// Validate checks that exactly one field is set and that a role is one of
// the four roles.
func (p Principal) Validate() error {
	switch {
	case !p.Key.IsZero() && p.MinRole != 0:
		return fmt.Errorf("%w: principal has both a key and a role", ErrInvalid)
	case !p.Key.IsZero():
		return nil
	case p.MinRole == 0:
		return fmt.Errorf("%w: principal has neither a key nor a role", ErrInvalid)
	case !p.MinRole.Valid():
		return fmt.Errorf("%w: principal: %w %d", ErrInvalid, roster.ErrUnknownRole, uint8(p.MinRole))
	}
	return nil
}

// String returns the text form: "role:<name>" or the key text
// "ed25519:<base64url>".
func (p Principal) String() string {
	if !p.Key.IsZero() {
		return p.Key.String()
	}
	return RolePrefix + p.MinRole.String()
}

// Label returns a short form for messages: the text form of a role
// principal; for a key, the member's label (name and fingerprint) when r
// knows it, else the fingerprint.
func (p Principal) Label(r *roster.Roster) string {
	if p.Key.IsZero() {
		return p.String()
	}
	if r != nil {
		if m, ok := r.Member(p.Key); ok {
			return m.Label()
		}
	}
	return p.Key.Fingerprint()
}

// MarshalText implements encoding.TextMarshaler (used by JSON output).
func (p Principal) MarshalText() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. It accepts only the
// forms that need no roster: "role:<name>" and a full key.
func (p *Principal) UnmarshalText(b []byte) error {
	v, err := ParsePrincipal(string(b), nil)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParsePrincipal parses what a human typed: "role:observer" (or member,
// operator, admin), a full key "ed25519:...", or, when r is not nil, a
// fingerprint, hex NodeID prefix or member name resolved with
// [roster.Roster.Lookup] (a leading '@' is ignored). A query matching
// several members fails with an error listing them (it matches
// [roster.ErrAmbiguous]); one matching nobody matches [roster.ErrNotMember].
// The "role:" and "ed25519:" forms are recognised first, so a member whose
// name starts with either must be named by key or fingerprint.
// A full key need not belong to a member: the ACL only ever grants access
// to members, so a key principal for a future member is harmless.
func ParsePrincipal(s string, r *roster.Roster) (Principal, error) {
	if rest, ok := strings.CutPrefix(s, RolePrefix); ok {
		role, err := roster.ParseRole(rest)
		if err != nil {
			return Principal{}, fmt.Errorf("principal %q: %w", s, err)
		}
		return RolePrincipal(role), nil
	}
	if strings.HasPrefix(s, proto.KeyPrefix) {
		k, err := proto.ParsePubKey(s)
		if err != nil {
			return Principal{}, fmt.Errorf("principal: %w", err)
		}
		if k.IsZero() {
			return Principal{}, fmt.Errorf("principal %q: %w: zero key", s, proto.ErrBadKey)
		}
		return KeyPrincipal(k), nil
	}
	if r == nil {
		return Principal{}, fmt.Errorf("principal %q: want %q<role> or a key %q<base64>", s, RolePrefix, proto.KeyPrefix)
	}
	ms, err := r.Lookup(strings.TrimPrefix(s, "@"))
	if err != nil {
		// The roster's errors name the query and, when it is ambiguous,
		// every member it matches.
		return Principal{}, fmt.Errorf("principal: %w", err)
	}
	return KeyPrincipal(ms[0].Key), nil
}

type wirePrincipal struct {
	Key     *proto.PubKey `cbor:"0,keyasint,omitempty"`
	MinRole *uint8        `cbor:"1,keyasint,omitempty"`
}

func (p Principal) toWire() wirePrincipal {
	var w wirePrincipal
	if !p.Key.IsZero() {
		k := p.Key
		w.Key = &k
	}
	if p.MinRole != 0 {
		r := uint8(p.MinRole)
		w.MinRole = &r
	}
	return w
}

// fromWire converts a decoded principal. A zero key or role 0 is kept as
// given so that Validate, not the conversion, rejects it.
func (w wirePrincipal) fromWire() (Principal, error) {
	switch {
	case w.Key != nil && w.MinRole != nil:
		return Principal{}, fmt.Errorf("%w: principal has both a key and a role", ErrInvalid)
	case w.Key == nil && w.MinRole == nil:
		return Principal{}, fmt.Errorf("%w: principal has neither a key nor a role", ErrInvalid)
	case w.Key != nil:
		if w.Key.IsZero() {
			return Principal{}, fmt.Errorf("%w: principal with the zero key", ErrInvalid)
		}
		return Principal{Key: *w.Key}, nil
	}
	p := Principal{MinRole: roster.Role(*w.MinRole)}
	if !p.MinRole.Valid() {
		return Principal{}, fmt.Errorf("%w: principal: %w %d", ErrInvalid, roster.ErrUnknownRole, *w.MinRole)
	}
	return p, nil
}

// encoded returns the canonical CBOR of p: the order principal lists are
// sorted in. Every key principal sorts before every role principal.
func (p Principal) encoded() []byte {
	b, err := proto.Marshal(p.toWire())
	if err != nil {
		// A struct of a fixed array and a small integer always encodes.
		panic(fmt.Sprintf("channel: encode principal: %v", err))
	}
	return b
}

// comparePrincipals orders principals by their canonical CBOR.
func comparePrincipals(a, b Principal) int { return bytes.Compare(a.encoded(), b.encoded()) }

// SortPrincipals returns a copy of ps in canonical order with duplicates
// removed, the form a policy carries. It fails if any principal is invalid.
func SortPrincipals(ps []Principal) ([]Principal, error) {
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(ps)
	slices.SortFunc(out, comparePrincipals)
	return slices.Compact(out), nil
}

// checkPrincipals checks that ps is valid, sorted and free of duplicates.
func checkPrincipals(what string, ps []Principal) error {
	var prev []byte
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
		cur := p.encoded()
		if i > 0 {
			switch c := bytes.Compare(prev, cur); {
			case c == 0:
				return fmt.Errorf("%w: %s list %s twice", ErrInvalid, what, p.Label(nil))
			case c > 0:
				return fmt.Errorf("%w: %w: %s not in canonical order", ErrInvalid, proto.ErrNonCanonical, what)
			}
		}
		prev = cur
	}
	return nil
}
