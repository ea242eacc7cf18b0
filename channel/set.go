package channel

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Set holds the channel policies a node knows, one version per channel,
// with channel names unique. It is safe for concurrent use. The zero
// value is an empty set ready to use.
//
// Every node must end up with the same policies from the same documents,
// whatever order they arrive in, so conflicts are decided by the
// documents alone:
//
//   - Versions of one channel: the greater version wins. Two different
//     bodies with the same version (two admins edited the same version
//     concurrently) are decided by the later timestamp, then by the
//     bytewise greater body: the later edit wins.
//   - Two channels claiming one name (two admins created it concurrently,
//     or a rename met a channel created meanwhile): the channel with the
//     bytewise lower channel id keeps the name, and the other is refused
//     or, if held, dropped and reported in [Outcome.Dropped]. Channel ids
//     are UUIDv7, whose leading bits are the creation time in Unix
//     milliseconds, so this is "the channel created first wins", with the
//     random bits breaking ties. The id is the same in every version of a
//     channel, so later edits never change the outcome.
//
// A set keeps one version per channel and no history, so a node that held
// a losing rename when the winner arrived drops that channel altogether,
// while a node that refused the rename still holds the version before it.
// The digest exchange ([Set.Digest], [Set.Newer]) re-sends that older
// version, which is accepted as a channel the node lacks, and the nodes
// agree again.
type Set struct {
	mu     sync.RWMutex
	byID   map[uuid.UUID]*Policy // guarded by mu
	byName map[string]uuid.UUID  // guarded by mu: the channel holding each name

	// saveMu serializes Save, so an older snapshot never overwrites the
	// files of a newer one.
	saveMu sync.Mutex
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{} }

// Outcome says what [Set.Merge] did.
type Outcome struct {
	// Changed: the set now holds the policy merged.
	Changed bool
	// Replaced is the version of the same channel that the policy
	// replaced, if any.
	Replaced *Policy
	// Dropped is another channel that lost its name to the policy and was
	// removed, if any.
	Dropped *Policy
}

// Apply is [Set.Merge] for callers that only need to know whether the set
// changed (to forward the policy to peers, for example).
func (s *Set) Apply(r *roster.Roster, p *Policy) (changed bool, err error) {
	o, err := s.Merge(r, p)
	return o.Changed, err
}

// Merge adds p, a new channel or a new version of one held, if it passes
// [Check] against r and the set's conflict rules (see [Set]). The same
// version again is not a change and not an error. An older version, or
// one that loses to a held edit of the same version, fails with
// [ErrRollback]; a channel whose name is held by a channel with a lower
// id fails with [ErrNameTaken]. Accepting p may drop another channel,
// reported in the outcome. The set keeps its own copy of p.
func (s *Set) Merge(r *roster.Roster, p *Policy) (Outcome, error) {
	if err := Check(r, p); err != nil {
		return Outcome{}, err
	}
	p = p.clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(p)
}

// addLocked applies the conflict rules and installs p. s.mu must be held.
func (s *Set) addLocked(p *Policy) (Outcome, error) {
	var o Outcome
	cur := s.byID[p.ID]
	if cur != nil {
		switch {
		case p.Version < cur.Version:
			return o, fmt.Errorf("%w: %s is older than the held v%d", ErrRollback, p, cur.Version)
		case p.Version == cur.Version && bytes.Equal(p.Doc.Body, cur.Doc.Body):
			return o, nil
		case p.Version == cur.Version && !editWins(p, cur):
			return o, fmt.Errorf("%w: %s conflicts with the held edit of the same version, which is later and wins", ErrRollback, p)
		}
	}
	var loser *Policy
	if id, ok := s.byName[p.Name]; ok && id != p.ID {
		holder := s.byID[id]
		if bytes.Compare(holder.ID[:], p.ID[:]) < 0 {
			return o, fmt.Errorf("%w: %s (id %s) is claimed by channel %s, created first", ErrNameTaken, p, p.ID, holder.ID)
		}
		loser = holder
	}
	if s.byID == nil {
		s.byID = map[uuid.UUID]*Policy{}
		s.byName = map[string]uuid.UUID{}
	}
	if loser != nil {
		delete(s.byID, loser.ID)
		delete(s.byName, loser.Name)
		o.Dropped = loser
	}
	if cur != nil && s.byName[cur.Name] == cur.ID {
		delete(s.byName, cur.Name)
	}
	s.byID[p.ID] = p
	s.byName[p.Name] = p.ID
	o.Changed, o.Replaced = true, cur
	return o, nil
}

// editWins decides between two different bodies of the same channel and
// version: the later timestamp wins, then the bytewise greater body.
func editWins(p, cur *Policy) bool {
	if c := cmp.Compare(p.Timestamp, cur.Timestamp); c != 0 {
		return c > 0
	}
	return bytes.Compare(p.Doc.Body, cur.Doc.Body) > 0
}

// ByID returns the policy of channel id.
func (s *Set) ByID(id uuid.UUID) (*Policy, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.byID[id]
	return p, ok
}

// ByName returns the policy of the channel named name. The name is
// normalized first, so "#Deploys" finds "deploys".
func (s *Set) ByName(name string) (*Policy, bool) {
	n, err := NormalizeName(name)
	if err != nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byName[n]
	if !ok {
		return nil, false
	}
	return s.byID[id], true
}

// Lookup resolves what a human typed to a channel: a name with or
// without '#', or a channel id. It fails with [ErrUnknownChannel].
func (s *Set) Lookup(query string) (*Policy, error) {
	if id, err := uuid.Parse(query); err == nil {
		if p, ok := s.ByID(id); ok {
			return p, nil
		}
	}
	if p, ok := s.ByName(query); ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownChannel, query)
}

// Len returns the number of channels held.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID)
}

// All returns every policy held, sorted by name.
func (s *Set) All() []*Policy {
	out := s.snapshot()
	slices.SortFunc(out, func(a, b *Policy) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// snapshot returns the policies held, sorted by channel id.
func (s *Set) snapshot() []*Policy {
	s.mu.RLock()
	out := make([]*Policy, 0, len(s.byID))
	for _, p := range s.byID {
		out = append(out, p)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Policy) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// Digest returns the channel versions held, sorted by channel id: what a
// node tells a peer so the peer can send what it holds newer.
func (s *Set) Digest() proto.PolicyDigest {
	ps := s.snapshot()
	d := proto.PolicyDigest{Policies: make([]proto.PolicyVersion, len(ps))}
	for i, p := range ps {
		d.Policies[i] = proto.PolicyVersion{Channel: p.ID, Version: p.Version}
	}
	return d
}

// Newer returns the policies held that d lacks or lists with an older
// version, sorted by channel id: what to send to the peer that sent d. If
// d names a channel twice, its greater version counts.
func (s *Set) Newer(d proto.PolicyDigest) []*Policy {
	have := make(map[uuid.UUID]uint64, len(d.Policies))
	for _, v := range d.Policies {
		have[v.Channel] = max(have[v.Channel], v.Version)
	}
	var out []*Policy
	for _, p := range s.snapshot() {
		if v, ok := have[p.ID]; !ok || v < p.Version {
			out = append(out, p)
		}
	}
	return out
}

// Revalidate re-examines the set after the roster changed to r. Policies
// for another org than r's can never be valid again: they are removed and
// returned in dropped. Policies that no longer pass [Check] because a
// signer or a listed channel admin is no longer an admin of r are kept,
// because they were valid when accepted and a channel must not vanish when
// an admin leaves, and are returned in stale, sorted by name, so that the
// node can ask a current admin to sign a new version. Until then peers
// that did not already hold such a policy refuse it. ACL checks need no
// revalidation: they consult the current roster on every call, so a
// member who left loses access at once.
func (s *Set) Revalidate(r *roster.Roster) (dropped, stale []*Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.byID {
		switch err := Check(r, p); {
		case err == nil:
		case p.Org != r.Org:
			delete(s.byID, id)
			delete(s.byName, p.Name)
			dropped = append(dropped, p)
		default:
			stale = append(stale, p)
		}
	}
	byName := func(a, b *Policy) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(dropped, byName)
	slices.SortFunc(stale, byName)
	return dropped, stale
}
