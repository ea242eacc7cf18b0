package channel

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Retention defaults (PROTOCOL.md), used when a policy leaves its retention
// at 0.
const (
	DefaultRetentionHours    = 72
	DefaultRetentionMessages = 10_000
)

// Limits of a policy body.
const (
	// MaxRetentionHours bounds retention_hours (about 114 years), so the
	// retention always fits a time.Duration.
	MaxRetentionHours = 1_000_000
	// MaxRetentionMessages bounds retention_messages, so it fits an int
	// on every platform.
	MaxRetentionMessages = math.MaxInt32
	// MaxPrincipals bounds each of the reader, writer and admin lists;
	// the decoder enforces the same limit on every CBOR array.
	MaxPrincipals = proto.MaxArrayElements
)

// Policy is a decoded channel policy: who may read and write a channel,
// who manages it, and how long its history is kept. The exported fields
// are the body; Doc holds the body bytes that were signed and the
// signatures. Doc.Body is the encoding of the fields as they were when
// last signed or parsed: after an edit, [Policy.Sign] encodes them again.
//
// Policies held by a [Set] are shared: treat them as read-only and start
// edits with [Policy.Next].
type Policy struct {
	ID   uuid.UUID
	Name string // without '#'; see [CheckName]
	// ReadACL lists who may read the channel and WriteACL who may post
	// to it (body keys 2 and 3), in canonical order (see [SortPrincipals]).
	// [Policy.CanRead] and [Policy.CanWrite] apply them.
	ReadACL  []Principal
	WriteACL []Principal
	Admins   []proto.PubKey // sorted bytewise; each must be a roster admin
	// AllowHistory says whether peers answer HistoryRequests for the channel.
	AllowHistory bool
	// RetentionHours and RetentionMessages are as they travel: 0 means the
	// default. Use [Policy.EffectiveRetention].
	RetentionHours    uint32
	RetentionMessages uint32
	Version           uint64
	Timestamp         int64 // Unix milliseconds when this version was made
	Org               string
	Doc               *proto.SignedDoc
}

type wirePolicy struct {
	ID                uuid.UUID       `cbor:"0,keyasint"`
	Name              string          `cbor:"1,keyasint"`
	Readers           []wirePrincipal `cbor:"2,keyasint"`
	Writers           []wirePrincipal `cbor:"3,keyasint"`
	Admins            []proto.PubKey  `cbor:"4,keyasint"`
	AllowHistory      bool            `cbor:"5,keyasint"`
	RetentionHours    uint32          `cbor:"6,keyasint"`
	RetentionMessages uint32          `cbor:"7,keyasint"`
	Version           uint64          `cbor:"8,keyasint"`
	Timestamp         int64           `cbor:"9,keyasint"`
	Org               string          `cbor:"10,keyasint"`
}

func (p *Policy) toWire() *wirePolicy {
	w := &wirePolicy{
		ID: p.ID, Name: p.Name, Admins: p.Admins, AllowHistory: p.AllowHistory,
		RetentionHours: p.RetentionHours, RetentionMessages: p.RetentionMessages,
		Version: p.Version, Timestamp: p.Timestamp, Org: p.Org,
		Readers: make([]wirePrincipal, len(p.ReadACL)),
		Writers: make([]wirePrincipal, len(p.WriteACL)),
	}
	for i, r := range p.ReadACL {
		w.Readers[i] = r.toWire()
	}
	for i, r := range p.WriteACL {
		w.Writers[i] = r.toWire()
	}
	return w
}

func fromWire(w *wirePolicy) (*Policy, error) {
	p := &Policy{
		ID: w.ID, Name: w.Name, Admins: w.Admins, AllowHistory: w.AllowHistory,
		RetentionHours: w.RetentionHours, RetentionMessages: w.RetentionMessages,
		Version: w.Version, Timestamp: w.Timestamp, Org: w.Org,
		ReadACL:  make([]Principal, len(w.Readers)),
		WriteACL: make([]Principal, len(w.Writers)),
	}
	for i, r := range w.Readers {
		v, err := r.fromWire()
		if err != nil {
			return nil, fmt.Errorf("reader %d: %w", i, err)
		}
		p.ReadACL[i] = v
	}
	for i, r := range w.Writers {
		v, err := r.fromWire()
		if err != nil {
			return nil, fmt.Errorf("writer %d: %w", i, err)
		}
		p.WriteACL[i] = v
	}
	return p, nil
}

// New returns version 1 of a new channel of org, with a fresh channel id
// (a UUIDv7, whose time is the channel's creation time), the signer as its
// only channel admin, and the default retention, signed by admin. The
// name is normalized with [NormalizeName], so "#Deploys" is accepted.
// Empty readers default to role:observer (every member may read) and
// empty writers to role:member (every member but observers may write).
// Whether admin is an admin of the roster is decided later, by [Check].
func New(org, name string, readers, writers []Principal, allowHistory bool, admin ed25519.PrivateKey) (*Policy, error) {
	if len(admin) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("new channel %q: private key of %d bytes", name, len(admin))
	}
	n, err := NormalizeName(name)
	if err != nil {
		return nil, fmt.Errorf("new channel: %w", err)
	}
	if len(readers) == 0 {
		readers = []Principal{RolePrincipal(roster.RoleObserver)}
	}
	if len(writers) == 0 {
		writers = []Principal{RolePrincipal(roster.RoleMember)}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new channel %q: channel id: %w", n, err)
	}
	p := &Policy{
		ID:           id,
		Name:         n,
		ReadACL:      slices.Clone(readers),
		WriteACL:     slices.Clone(writers),
		Admins:       []proto.PubKey{proto.PubKeyOf(admin)},
		AllowHistory: allowHistory,
		Version:      1,
		Timestamp:    time.Now().UnixMilli(),
		Org:          org,
	}
	if err := p.Sign(admin); err != nil {
		return nil, err
	}
	return p, nil
}

// Next returns an unsigned deep copy of p with the version incremented
// and the timestamp set to now: the start of an edit. Change its fields,
// then [Policy.Sign] it.
func (p *Policy) Next() *Policy {
	q := p.clone()
	q.Doc = nil
	q.Version++
	q.Timestamp = time.Now().UnixMilli()
	return q
}

// clone returns a deep copy of p, sharing nothing mutable.
func (p *Policy) clone() *Policy {
	q := *p
	q.ReadACL = slices.Clone(p.ReadACL)
	q.WriteACL = slices.Clone(p.WriteACL)
	q.Admins = slices.Clone(p.Admins)
	if p.Doc != nil {
		q.Doc = &proto.SignedDoc{Body: slices.Clone(p.Doc.Body), Sigs: slices.Clone(p.Doc.Sigs)}
	}
	return &q
}

// Validate checks the structural rules of the body fields.
func (p *Policy) Validate() error {
	// The id must be a UUIDv7: its time decides name conflicts (see [Set]).
	if p.ID.Version() != 7 || p.ID.Variant() != uuid.RFC4122 {
		return fmt.Errorf("channel %s: %w: the id is not a UUIDv7", p.ID, ErrInvalid)
	}
	if err := CheckName(p.Name); err != nil {
		return fmt.Errorf("channel %s: %w", p.ID, err)
	}
	if err := roster.CheckOrg(p.Org); err != nil {
		return fmt.Errorf("%s: %w: %w", p, ErrInvalid, err)
	}
	if p.Version == 0 {
		return fmt.Errorf("%s: %w: versions start at 1", p, ErrInvalid)
	}
	if len(p.ReadACL) > MaxPrincipals || len(p.WriteACL) > MaxPrincipals || len(p.Admins) > MaxPrincipals {
		return fmt.Errorf("%s: %w: more than %d entries in a list", p, ErrInvalid, MaxPrincipals)
	}
	if err := checkPrincipals("readers", p.ReadACL); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if err := checkPrincipals("writers", p.WriteACL); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if len(p.Admins) == 0 {
		return fmt.Errorf("%s: %w: no channel admin", p, ErrInvalid)
	}
	for i, k := range p.Admins {
		if k.IsZero() {
			return fmt.Errorf("%s: %w: admin %d is the zero key", p, ErrInvalid, i)
		}
		if i > 0 {
			switch c := bytes.Compare(p.Admins[i-1][:], k[:]); {
			case c == 0:
				return fmt.Errorf("%s: %w: admins list %s twice", p, ErrInvalid, k.Fingerprint())
			case c > 0:
				return fmt.Errorf("%s: %w: %w: admins not sorted by key", p, ErrInvalid, proto.ErrNonCanonical)
			}
		}
	}
	if p.RetentionHours > MaxRetentionHours {
		return fmt.Errorf("%s: %w: retention of %d hours exceeds %d", p, ErrInvalid, p.RetentionHours, MaxRetentionHours)
	}
	if p.RetentionMessages > MaxRetentionMessages {
		return fmt.Errorf("%s: %w: retention of %d messages exceeds %d", p, ErrInvalid, p.RetentionMessages, MaxRetentionMessages)
	}
	return nil
}

// EffectiveRetention returns how long and how many messages the channel's
// history is kept, with 0 replaced by the defaults. History is pruned by
// whichever limit is reached first.
func (p *Policy) EffectiveRetention() (time.Duration, int) {
	h, n := int64(p.RetentionHours), int(p.RetentionMessages)
	if h == 0 {
		h = DefaultRetentionHours
	}
	if n == 0 {
		n = DefaultRetentionMessages
	}
	return time.Duration(h) * time.Hour, n
}

// String names the policy for messages: `channel "#name" v3`.
func (p *Policy) String() string { return fmt.Sprintf("channel %q v%d", "#"+p.Name, p.Version) }

// Parse decodes a policy document: the signed wrapper and the body, both
// strictly and canonically, then checks the structural rules and that
// every signature verifies. A document carrying any bad signature is
// rejected (wrapping [proto.ErrBadSignature]), never accepted on the
// strength of its other signatures. Parse does not judge authority; see
// [Check] and [CheckUpdate].
func Parse(b []byte) (*Policy, error) {
	doc, err := proto.ParseSignedDoc(b)
	if err != nil {
		return nil, fmt.Errorf("channel policy: %w", err)
	}
	var w wirePolicy
	if err := proto.UnmarshalCanonical(doc.Body, &w); err != nil {
		return nil, fmt.Errorf("channel policy body: %w", err)
	}
	p, err := fromWire(&w)
	if err != nil {
		return nil, fmt.Errorf("channel policy body: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if _, err := doc.ValidSigners(proto.DomainPolicy); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	p.Doc = doc
	return p, nil
}

// encodeBody validates the fields and returns their canonical encoding.
func (p *Policy) encodeBody() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(p.toWire())
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p, err)
	}
	return b, nil
}

// signedBody returns Doc.Body after checking that it is the encoding of
// the current fields, so nothing is ever judged or sent by fields that no
// one signed.
func (p *Policy) signedBody() ([]byte, error) {
	if p.Doc == nil || len(p.Doc.Sigs) == 0 {
		return nil, fmt.Errorf("%w: %s has no signatures", ErrUnsigned, p)
	}
	body, err := p.encodeBody()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(body, p.Doc.Body) {
		return nil, fmt.Errorf("%w: %s was changed after it was signed", ErrUnsigned, p)
	}
	return body, nil
}

// Encode returns the wire form of the signed document. It fails with
// [ErrUnsigned] if the policy has no signature or its fields were changed
// since the last [Policy.Sign].
func (p *Policy) Encode() ([]byte, error) {
	if _, err := p.signedBody(); err != nil {
		return nil, err
	}
	b, err := p.Doc.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p, err)
	}
	return b, nil
}

// Sign puts the reader, writer and admin lists in canonical order, then
// adds key's signature, replacing an earlier one by the same key. If the
// fields still encode to the signed body, the body is kept as it is, so
// the other signatures stay valid. If the fields were edited, the body is
// encoded anew and the old signatures, which no longer cover it, are
// dropped.
func (p *Policy) Sign(key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("sign %s: private key of %d bytes", p, len(key))
	}
	if err := p.canonicalize(); err != nil {
		return fmt.Errorf("sign %s: %w", p, err)
	}
	body, err := p.encodeBody()
	if err != nil {
		return err
	}
	if p.Doc == nil || !bytes.Equal(body, p.Doc.Body) {
		p.Doc = &proto.SignedDoc{Body: body}
	}
	p.Doc.AddSignature(key, proto.DomainPolicy)
	return nil
}

// canonicalize sorts the lists and removes duplicates.
func (p *Policy) canonicalize() error {
	var err error
	if p.ReadACL, err = SortPrincipals(p.ReadACL); err != nil {
		return fmt.Errorf("readers: %w", err)
	}
	if p.WriteACL, err = SortPrincipals(p.WriteACL); err != nil {
		return fmt.Errorf("writers: %w", err)
	}
	p.Admins = slices.Clone(p.Admins)
	slices.SortFunc(p.Admins, func(a, b proto.PubKey) int { return bytes.Compare(a[:], b[:]) })
	p.Admins = slices.Compact(p.Admins)
	return nil
}

// Signers returns the keys that signed the document, sorted. Parse has
// verified their signatures; whether they count is for [Check].
func (p *Policy) Signers() []proto.PubKey {
	if p.Doc == nil {
		return nil
	}
	out := make([]proto.PubKey, len(p.Doc.Sigs))
	for i, s := range p.Doc.Sigs {
		out[i] = s.Signer
	}
	return out
}
