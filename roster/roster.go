package roster

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/proto"
)

// Limits of a roster body.
const (
	// MaxOrgLen bounds an org id, as everywhere in the protocol.
	MaxOrgLen = proto.MaxOrgLen
	// MaxNameLen bounds a member's display name.
	MaxNameLen = 128
	// MaxMembers bounds the member list; the decoder enforces the same
	// limit on every CBOR array.
	MaxMembers = proto.MaxArrayElements
)

// Member is one entry of a roster.
type Member struct {
	Key  proto.PubKey
	Role Role
	// Name is a display name for humans: never route or authorise by it.
	Name string
	// Archive marks a node that keeps history longer than the default
	// retention, so others may prefer it for history sync.
	Archive bool
	// PrevKey is the member's previous key while a key rotation is in its
	// grace window (see [Roster.Rekey]); zero when there is none. Links and
	// envelopes by it count as the member's until PrevUntil.
	PrevKey proto.PubKey
	// PrevUntil is when PrevKey stops being accepted, in Unix
	// milliseconds; 0 exactly when PrevKey is zero.
	PrevUntil int64
}

// Label returns "name (fingerprint)", or just the fingerprint when the
// member has no name: the form used in messages.
func (m Member) Label() string {
	if m.Name == "" {
		return m.Key.Fingerprint()
	}
	return m.Name + " (" + m.Key.Fingerprint() + ")"
}

// Roster is a decoded roster document. The exported fields are the body;
// Doc holds the body bytes that were signed and the signatures. Doc.Body
// is the encoding of the fields as they were when last signed or parsed:
// after an edit, [Roster.Sign] encodes the fields again.
type Roster struct {
	Org       string
	Version   uint64
	Timestamp int64 // Unix milliseconds
	// Threshold is the quorum as it travels (body key 3): 0 means 1. Use
	// [Roster.Quorum] for the effective value.
	Threshold uint32
	Members   []Member // sorted bytewise by key
	Doc       *proto.SignedDoc
}

type wireRoster struct {
	Org       string       `cbor:"0,keyasint"`
	Version   uint64       `cbor:"1,keyasint"`
	Timestamp int64        `cbor:"2,keyasint"`
	Quorum    uint32       `cbor:"3,keyasint,omitempty"`
	Members   []wireMember `cbor:"4,keyasint"`
}

type wireMember struct {
	Key     proto.PubKey `cbor:"0,keyasint"`
	Role    uint8        `cbor:"1,keyasint"`
	Name    string       `cbor:"2,keyasint,omitempty"`
	Archive bool         `cbor:"3,keyasint,omitempty"`
	// PrevKey and PrevUntil are written together, or not at all.
	PrevKey   *proto.PubKey `cbor:"4,keyasint,omitempty"`
	PrevUntil int64         `cbor:"5,keyasint,omitempty"`
}

func (r *Roster) toWire() *wireRoster {
	q := r.Threshold
	if q == 1 {
		q = 0 // a quorum of 1 has one encoding: the absent key
	}
	w := &wireRoster{Org: r.Org, Version: r.Version, Timestamp: r.Timestamp, Quorum: q,
		Members: make([]wireMember, len(r.Members))}
	for i, m := range r.Members {
		w.Members[i] = wireMember{Key: m.Key, Role: uint8(m.Role), Name: m.Name, Archive: m.Archive, PrevUntil: m.PrevUntil}
		if !m.PrevKey.IsZero() {
			w.Members[i].PrevKey = &m.PrevKey
		}
	}
	return w
}

func fromWire(w *wireRoster) *Roster {
	r := &Roster{Org: w.Org, Version: w.Version, Timestamp: w.Timestamp, Threshold: w.Quorum,
		Members: make([]Member, len(w.Members))}
	for i, m := range w.Members {
		r.Members[i] = Member{Key: m.Key, Role: Role(m.Role), Name: m.Name, Archive: m.Archive, PrevUntil: m.PrevUntil}
		if m.PrevKey != nil {
			r.Members[i].PrevKey = *m.PrevKey
		}
	}
	return r
}

// Parse decodes a roster document: the signed wrapper and the body, both
// strictly and canonically, then checks the structural rules and that
// every signature verifies. A document carrying any bad signature is
// rejected (wrapping [proto.ErrBadSignature]), never accepted on the
// strength of its other signatures. Parse does not judge authority; see
// [CheckBootstrap] and [CheckUpdate].
func Parse(b []byte) (*Roster, error) {
	doc, err := proto.ParseSignedDoc(b)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	var w wireRoster
	if err := proto.UnmarshalCanonical(doc.Body, &w); err != nil {
		return nil, fmt.Errorf("roster body: %w", err)
	}
	if w.Quorum == 1 {
		// Absent means 1, so an explicit 1 is a second encoding of the
		// same body.
		return nil, fmt.Errorf("roster body: %w: quorum 1 written explicitly (omit it)", proto.ErrNonCanonical)
	}
	r := fromWire(&w)
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if _, err := doc.ValidSigners(proto.DomainRoster); err != nil {
		return nil, fmt.Errorf("roster %q v%d: %w", r.Org, r.Version, err)
	}
	r.Doc = doc
	return r, nil
}

// Validate checks the structural rules of the body fields.
func (r *Roster) Validate() error {
	if err := CheckOrg(r.Org); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if r.Version == 0 {
		return fmt.Errorf("%w: %q has version 0; versions start at 1", ErrInvalid, r.Org)
	}
	if len(r.Members) > MaxMembers {
		return fmt.Errorf("%w: %q v%d has %d members, limit %d", ErrInvalid, r.Org, r.Version, len(r.Members), MaxMembers)
	}
	admins := 0
	for i, m := range r.Members {
		if err := m.validate(); err != nil {
			return fmt.Errorf("%w: %q v%d member %d: %w", ErrInvalid, r.Org, r.Version, i, err)
		}
		if i > 0 {
			switch c := bytes.Compare(r.Members[i-1].Key[:], m.Key[:]); {
			case c == 0:
				return fmt.Errorf("%w: %q v%d lists %s twice", ErrInvalid, r.Org, r.Version, m.Key.Fingerprint())
			case c > 0:
				return fmt.Errorf("%w: %q v%d: %w: members not sorted by key", ErrInvalid, r.Org, r.Version, proto.ErrNonCanonical)
			}
		}
		if m.Role == RoleAdmin {
			admins++
		}
	}
	if err := r.checkPrevKeys(); err != nil {
		return fmt.Errorf("%w: %q v%d: %w", ErrInvalid, r.Org, r.Version, err)
	}
	if admins == 0 {
		return fmt.Errorf("%w: %q v%d has no admin", ErrInvalid, r.Org, r.Version)
	}
	if int(r.Threshold) > admins {
		return fmt.Errorf("%w: %q v%d: %w: quorum %d with %d admins", ErrInvalid, r.Org, r.Version, ErrQuorum, r.Threshold, admins)
	}
	return nil
}

func (m Member) validate() error {
	if m.Key.IsZero() {
		return fmt.Errorf("zero key")
	}
	if !m.Role.Valid() {
		return fmt.Errorf("%s: %w %d", m.Key.Fingerprint(), ErrUnknownRole, uint8(m.Role))
	}
	if err := CheckStoredName(m.Name); err != nil {
		return fmt.Errorf("%s: %w", m.Key.Fingerprint(), err)
	}
	return m.validatePrev()
}

// CheckOrg checks an org id: 1..[MaxOrgLen] bytes of UTF-8 without
// control characters (it appears in headers, logs and the Noise prologue).
func CheckOrg(org string) error {
	if org == "" || len(org) > MaxOrgLen {
		return fmt.Errorf("org id must be 1..%d bytes, got %d", MaxOrgLen, len(org))
	}
	return checkText("org id", org)
}

func checkText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return fmt.Errorf("%s %q contains a control character", what, s)
		}
	}
	return nil
}

// encodeBody validates the fields and returns their canonical encoding.
func (r *Roster) encodeBody() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	b, err := proto.Marshal(r.toWire())
	if err != nil {
		return nil, fmt.Errorf("encode roster %q v%d: %w", r.Org, r.Version, err)
	}
	return b, nil
}

// signedBody returns Doc.Body after checking that it is the encoding of
// the current fields, so nothing is ever judged or sent by fields that no
// one signed.
func (r *Roster) signedBody() ([]byte, error) {
	if r.Doc == nil {
		return nil, fmt.Errorf("%w: %q v%d has no signatures", ErrUnsigned, r.Org, r.Version)
	}
	body, err := r.encodeBody()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(body, r.Doc.Body) {
		return nil, fmt.Errorf("%w: %q v%d was changed after it was signed", ErrUnsigned, r.Org, r.Version)
	}
	return body, nil
}

// Encode returns the wire form of the signed document. It fails with
// [ErrUnsigned] if the fields were changed since the last [Roster.Sign].
func (r *Roster) Encode() ([]byte, error) {
	if _, err := r.signedBody(); err != nil {
		return nil, err
	}
	b, err := r.Doc.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode roster %q v%d: %w", r.Org, r.Version, err)
	}
	return b, nil
}

// Sign adds key's signature, replacing an earlier one by the same key. If
// the fields still encode to the signed body, the body bytes are kept as
// they are, so the other signatures stay valid (this is how several admins
// sign one update). If the fields were edited, the body is encoded anew
// and the old signatures, which no longer cover it, are dropped.
func (r *Roster) Sign(key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("sign roster %q v%d: private key of %d bytes", r.Org, r.Version, len(key))
	}
	body, err := r.encodeBody()
	if err != nil {
		return err
	}
	if r.Doc == nil || !bytes.Equal(body, r.Doc.Body) {
		r.Doc = &proto.SignedDoc{Body: body}
	}
	r.Doc.AddSignature(key, proto.DomainRoster)
	return nil
}

// Signers returns the keys that signed the document, sorted. Parse has
// verified their signatures; whether they count is for [CheckUpdate].
func (r *Roster) Signers() []proto.PubKey {
	if r.Doc == nil {
		return nil
	}
	out := make([]proto.PubKey, len(r.Doc.Sigs))
	for i, s := range r.Doc.Sigs {
		out[i] = s.Signer
	}
	return out
}

// New returns version 1 of a roster for org with admin as its only
// member, an admin named name, signed by admin.
func New(org string, admin ed25519.PrivateKey, name string) (*Roster, error) {
	if len(admin) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("new roster %q: private key of %d bytes", org, len(admin))
	}
	r := &Roster{
		Org:       org,
		Version:   1,
		Timestamp: time.Now().UnixMilli(),
		Members:   []Member{{Key: proto.PubKeyOf(admin), Role: RoleAdmin, Name: name}},
	}
	if err := r.Sign(admin); err != nil {
		return nil, err
	}
	return r, nil
}

// Next returns an unsigned copy of r with the version incremented and the
// timestamp set to now: the start of an update. Edit it, then [Roster.Sign].
func (r *Roster) Next() *Roster {
	return &Roster{
		Org:       r.Org,
		Version:   r.Version + 1,
		Timestamp: time.Now().UnixMilli(),
		Threshold: r.Threshold,
		Members:   pruneExpired(slices.Clone(r.Members), now()),
	}
}

// Quorum returns the number of admin signatures an update of r needs:
// the quorum field, or 1 when it is 0.
func (r *Roster) Quorum() int {
	return max(int(r.Threshold), 1)
}

func (r *Roster) index(k proto.PubKey) (int, bool) {
	return slices.BinarySearchFunc(r.Members, k, func(m Member, k proto.PubKey) int {
		return bytes.Compare(m.Key[:], k[:])
	})
}

// Member returns the member with key k: the member whose key is k, or
// the member whose previous key is k while its grace window is open by
// this machine's clock (see [Member.PrevValid]). The Member's Key is its
// current key either way.
func (r *Roster) Member(k proto.PubKey) (Member, bool) {
	if i, ok := r.index(k); ok {
		return r.Members[i], true
	}
	if m, ok := r.Previous(k); ok && m.PrevValid(now()) {
		return m, true
	}
	return Member{}, false
}

// Label names k for messages: the [Member.Label] of a member, the name and
// fingerprint of a member's previous key (valid or not), the fingerprint
// of anyone else.
func (r *Roster) Label(k proto.PubKey) string {
	if i, ok := r.index(k); ok {
		return r.Members[i].Label()
	}
	if m, ok := r.Previous(k); ok && m.Name != "" {
		return m.Name + " (" + k.Fingerprint() + ")"
	}
	return k.Fingerprint()
}

// Role returns the role of key k, and false if k is not a member.
func (r *Roster) Role(k proto.PubKey) (Role, bool) {
	m, ok := r.Member(k)
	return m.Role, ok
}

// IsAdmin reports whether k is an admin of r. Only a current key counts:
// an admin's previous key signs no roster or policy.
func (r *Roster) IsAdmin(k proto.PubKey) bool {
	i, ok := r.index(k)
	return ok && r.Members[i].Role == RoleAdmin
}

// Admins returns the admins' keys in key order.
func (r *Roster) Admins() []proto.PubKey {
	var out []proto.PubKey
	for _, m := range r.Members {
		if m.Role == RoleAdmin {
			out = append(out, m.Key)
		}
	}
	return out
}

// String names the roster in messages: roster "acme" v3.
func (r *Roster) String() string { return fmt.Sprintf("roster %q v%d", r.Org, r.Version) }

// Add adds m. The key must be new and the name, if any, valid under
// [CheckName] and unlike any other member's (see [Skeleton]), so that
// lookups by name stay unambiguous and no name poses as another.
func (r *Roster) Add(m Member) error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("add to %s: %w", r, err)
	}
	if err := CheckName(m.Name); err != nil {
		return fmt.Errorf("add to %s: %s: %w", r, m.Key.Fingerprint(), err)
	}
	i, found := r.index(m.Key)
	if found {
		return fmt.Errorf("add to %s: %s is %w as %s", r, r.Members[i].Label(), ErrDuplicateMember, r.Members[i].Role)
	}
	if o, ok := r.Previous(m.Key); ok {
		return fmt.Errorf("add to %s: %s is %w: the previous key of %s", r, m.Key.Fingerprint(), ErrDuplicateMember, o.Label())
	}
	if err := r.checkNameFree(m.Name, m.Key); err != nil {
		return fmt.Errorf("add to %s: %w", r, err)
	}
	if len(r.Members) >= MaxMembers {
		return fmt.Errorf("add to %s: %w: already %d members, limit %d", r, ErrInvalid, len(r.Members), MaxMembers)
	}
	r.Members = slices.Insert(r.Members, i, m)
	return nil
}

func (r *Roster) checkNameFree(name string, self proto.PubKey) error {
	if name == "" {
		return nil
	}
	if o, ok := r.NameTaken(name, self); ok {
		if o.Name == name {
			return fmt.Errorf("%w: %s is %s", ErrDuplicateName, quoteName(name), o.Label())
		}
		return fmt.Errorf("%w: %s looks like %s, the name of %s", ErrDuplicateName, quoteName(name), quoteName(o.Name), o.Key.Fingerprint())
	}
	return nil
}

// Remove removes the member with key k. It refuses to remove the last
// admin, or an admin the quorum still needs.
func (r *Roster) Remove(k proto.PubKey) error {
	i, ok := r.index(k)
	if !ok {
		return fmt.Errorf("remove from %s: %s is %w", r, k.Fingerprint(), ErrNotMember)
	}
	if err := r.checkAdminLoss(r.Members[i]); err != nil {
		return fmt.Errorf("remove from %s: %w", r, err)
	}
	r.Members = slices.Delete(r.Members, i, i+1)
	return nil
}

// SetRole changes the role of the member with key k.
func (r *Roster) SetRole(k proto.PubKey, role Role) error {
	if !role.Valid() {
		return fmt.Errorf("set role in %s: %w %d", r, ErrUnknownRole, uint8(role))
	}
	i, ok := r.index(k)
	if !ok {
		return fmt.Errorf("set role in %s: %s is %w", r, k.Fingerprint(), ErrNotMember)
	}
	if role != RoleAdmin {
		if err := r.checkAdminLoss(r.Members[i]); err != nil {
			return fmt.Errorf("set role in %s: %w", r, err)
		}
	}
	r.Members[i].Role = role
	return nil
}

// SetName changes the display name of the member with key k.
func (r *Roster) SetName(k proto.PubKey, name string) error {
	i, ok := r.index(k)
	if !ok {
		return fmt.Errorf("rename in %s: %s is %w", r, k.Fingerprint(), ErrNotMember)
	}
	if err := CheckName(name); err != nil {
		return fmt.Errorf("rename in %s: %w", r, err)
	}
	if err := r.checkNameFree(name, k); err != nil {
		return fmt.Errorf("rename in %s: %w", r, err)
	}
	r.Members[i].Name = name
	return nil
}

// SetQuorum sets how many admins must sign the next update. 0 and 1 both
// mean one signature and are stored as 0, the form the wire omits.
func (r *Roster) SetQuorum(n int) error {
	if n < 0 {
		return fmt.Errorf("set quorum of %s: negative quorum %d", r, n)
	}
	if admins := len(r.Admins()); n > admins {
		return fmt.Errorf("set quorum of %s: %w: quorum %d with %d admins", r, ErrQuorum, n, admins)
	}
	if n <= 1 {
		n = 0
	}
	r.Threshold = uint32(n)
	return nil
}

// checkAdminLoss refuses to demote or remove m if it is the last admin or
// if the quorum needs it.
func (r *Roster) checkAdminLoss(m Member) error {
	if m.Role != RoleAdmin {
		return nil
	}
	admins := len(r.Admins())
	if admins == 1 {
		return fmt.Errorf("%w: %s is the only admin", ErrLastAdmin, m.Label())
	}
	if r.Quorum() > admins-1 {
		return fmt.Errorf("%w: quorum %d needs %d admins; lower the quorum first", ErrQuorum, r.Quorum(), r.Quorum())
	}
	return nil
}
