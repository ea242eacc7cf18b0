package roster

import (
	"fmt"
	"slices"
	"time"

	"github.com/meshd/meshd/proto"
)

// PrevKeySkew is how long past PrevUntil a previous key is still accepted,
// by the receiver's clock: the clock difference two members may have
// (proto.MaxClockSkew), so that no member cuts a rotating member off before
// the others do.
const PrevKeySkew = proto.MaxClockSkew

// now is the clock previous keys are judged by; tests replace it.
var now = time.Now

// PrevValid reports whether m's previous key is still accepted at t: it
// has one and t is before PrevUntil plus [PrevKeySkew].
func (m Member) PrevValid(t time.Time) bool {
	return !m.PrevKey.IsZero() && t.UnixMilli() < m.PrevUntil+PrevKeySkew.Milliseconds()
}

// PrevDeadline is the instant m's previous key stops being accepted, and
// false when it has none.
func (m Member) PrevDeadline() (time.Time, bool) {
	if m.PrevKey.IsZero() {
		return time.Time{}, false
	}
	return time.UnixMilli(m.PrevUntil).Add(PrevKeySkew), true
}

func (m Member) validatePrev() error {
	switch {
	case m.PrevKey.IsZero() && m.PrevUntil != 0:
		return fmt.Errorf("%s: prev_until without prev_key", m.Key.Fingerprint())
	case m.PrevKey.IsZero():
		return nil
	case m.PrevUntil <= 0:
		return fmt.Errorf("%s: prev_key without a positive prev_until", m.Key.Fingerprint())
	case m.PrevKey == m.Key:
		return fmt.Errorf("%s: prev_key is the member's own key", m.Key.Fingerprint())
	}
	return nil
}

// checkPrevKeys refuses a previous key that is also a member's key or
// another member's previous key: every key names at most one member.
func (r *Roster) checkPrevKeys() error {
	var seen map[proto.PubKey]bool
	for _, m := range r.Members {
		if m.PrevKey.IsZero() {
			continue
		}
		if _, ok := r.index(m.PrevKey); ok {
			return fmt.Errorf("previous key %s of %s is a member's key", m.PrevKey.Fingerprint(), m.Key.Fingerprint())
		}
		if seen == nil {
			seen = map[proto.PubKey]bool{}
		}
		if seen[m.PrevKey] {
			return fmt.Errorf("previous key %s listed twice", m.PrevKey.Fingerprint())
		}
		seen[m.PrevKey] = true
	}
	return nil
}

// Previous returns the member whose previous key is k, whether or not its
// grace window is still open: for names in history and for telling a
// retired key from a stranger's. [Roster.Member] is the check for access.
func (r *Roster) Previous(k proto.PubKey) (Member, bool) {
	if k.IsZero() {
		return Member{}, false
	}
	for _, m := range r.Members {
		if m.PrevKey == k {
			return m, true
		}
	}
	return Member{}, false
}

// Known returns the member k names for display: by its key, or by a
// previous key even past its window.
func (r *Roster) Known(k proto.PubKey) (Member, bool) {
	if i, ok := r.index(k); ok {
		return r.Members[i], true
	}
	return r.Previous(k)
}

// NextPrevDeadline returns the earliest instant after t at which a
// previous key of r stops being accepted, and false when none will.
func (r *Roster) NextPrevDeadline(t time.Time) (time.Time, bool) {
	var first time.Time
	for _, m := range r.Members {
		if d, ok := m.PrevDeadline(); ok && d.After(t) && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	return first, !first.IsZero()
}

// Rekey moves the member whose key is old to the key next, keeping its
// name, role and archive flag. With until after zero, old stays the
// member's previous key, accepted until then (Unix ms); with until 0 it is
// revoked at once (a compromised key). A previous key the member still
// had is replaced. next must not be any member's key or previous key.
func (r *Roster) Rekey(old, next proto.PubKey, until int64) error {
	i, ok := r.index(old)
	if !ok {
		return fmt.Errorf("rekey in %s: %s is %w", r, old.Fingerprint(), ErrNotMember)
	}
	if next.IsZero() {
		return fmt.Errorf("rekey in %s: zero key", r)
	}
	if j, ok := r.index(next); ok {
		return fmt.Errorf("rekey in %s: %s is %w as %s", r, r.Members[j].Label(), ErrDuplicateMember, r.Members[j].Role)
	}
	if m, ok := r.Previous(next); ok {
		return fmt.Errorf("rekey in %s: %s is %w: the previous key of %s", r, next.Fingerprint(), ErrDuplicateMember, m.Label())
	}
	if until < 0 {
		return fmt.Errorf("rekey in %s: grace ends at %d, before 1970", r, until)
	}
	m := r.Members[i]
	m.Key, m.PrevKey, m.PrevUntil = next, proto.PubKey{}, 0
	if until > 0 {
		m.PrevKey, m.PrevUntil = old, until
	}
	r.Members = slices.Delete(r.Members, i, i+1)
	j, _ := r.index(next)
	r.Members = slices.Insert(r.Members, j, m)
	return nil
}

// pruneExpired clears the previous keys whose window closed before t, so
// a roster carries a rotation only while it matters (and older nodes, which
// refuse the fields, take the rosters after it).
func pruneExpired(ms []Member, t time.Time) []Member {
	for i, m := range ms {
		if !m.PrevKey.IsZero() && !m.PrevValid(t) {
			ms[i].PrevKey, ms[i].PrevUntil = proto.PubKey{}, 0
		}
	}
	return ms
}
