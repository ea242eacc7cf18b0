// Package presence keeps the presence table: what each member last said
// about itself (Online, Away, Offline), resolved by the highest sequence
// number per sender rather than by clocks, and aged to Offline after a
// silence longer than both this node's presence_ttl and the one the
// member announced (its Presence envelope's ttl_secs). It also numbers our
// own announcements.
package presence

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// DefaultTTL is how long a member may stay silent before it is shown as
// offline: five minutes.
const DefaultTTL = 5 * time.Minute

// Entry is one member's presence as this node sees it.
type Entry struct {
	Key proto.PubKey `json:"key"`
	// Announced is the state the member last announced.
	Announced proto.PresenceState `json:"announced"`
	// State is Announced, or Offline when the member has been silent
	// longer than the TTL.
	State proto.PresenceState `json:"state"`
	Seq   uint64              `json:"seq"`
	// LastHeard is when anything was last received from the member.
	LastHeard time.Time `json:"last_heard"`
	// TTL is the silence after which the member is shown offline: the
	// longer of the table's TTL and the one the member announced.
	TTL time.Duration `json:"ttl"`
	// Note is the short status the member announced with Announced, if
	// any ("" while it is offline).
	Note string `json:"note,omitempty"`
}

type entry struct {
	announced proto.PresenceState
	seq       uint64
	heard     time.Time
	expired   bool
	ttl       time.Duration // the TTL the member announced with seq; 0 if none
	note      string        // the note announced with seq
}

// Table is the presence table. It is safe for concurrent use.
type Table struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[proto.PubKey]*entry // guarded by mu
}

// NewTable returns an empty table that ages members out after ttl.
func NewTable(ttl time.Duration) *Table {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Table{ttl: ttl, m: map[proto.PubKey]*entry{}}
}

// TTL returns the silence after which a member is shown offline.
func (t *Table) TTL() time.Duration { return t.ttl }

// Observe applies an announcement from k heard at now. The highest seq
// wins; an older or equal seq changes nothing but still counts as a sign
// of life. It reports whether the effective state changed.
func (t *Table) Observe(k proto.PubKey, p proto.Presence, now time.Time) bool {
	return t.ObserveTTL(k, p, 0, now)
}

// ObserveTTL is [Table.Observe] for an announcement that also says how
// long its sender may stay silent (its presence_ttl, carried as the
// envelope's ttl_secs). k is shown offline only after a silence longer
// than both that and the table's own TTL, so a member that refreshes
// less often than this node would is not shown offline between its
// refreshes. 0 means the announcement said nothing.
func (t *Table) ObserveTTL(k proto.PubKey, p proto.Presence, ttl time.Duration, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[k]
	if e == nil {
		e = &entry{}
		t.m[k] = e
	}
	before := t.stateLocked(e, now)
	if now.After(e.heard) {
		e.heard = now
	}
	e.expired = false
	if p.Seq > e.seq || e.announced == 0 {
		e.seq = p.Seq
		e.announced = p.State
		e.ttl = ttl
		e.note = p.Note
	}
	return t.stateLocked(e, now) != before
}

// Touch records a sign of life from k (any envelope or link traffic).
func (t *Table) Touch(k proto.PubKey, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[k]; e != nil && now.After(e.heard) {
		e.heard = now
		e.expired = false
	}
}

func (t *Table) stateLocked(e *entry, now time.Time) proto.PresenceState {
	if e.announced == 0 {
		return 0
	}
	if e.expired || now.Sub(e.heard) > t.ttlOf(e) {
		return proto.Offline
	}
	return e.announced
}

// ttlOf returns the silence after which e is shown offline.
func (t *Table) ttlOf(e *entry) time.Duration { return max(t.ttl, e.ttl) }

// Get returns k's entry as of now.
func (t *Table) Get(k proto.PubKey, now time.Time) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[k]
	if e == nil || e.announced == 0 {
		return Entry{}, false
	}
	return t.entryLocked(k, e, now), true
}

func (t *Table) entryLocked(k proto.PubKey, e *entry, now time.Time) Entry {
	x := Entry{Key: k, Announced: e.announced, State: t.stateLocked(e, now), Seq: e.seq, LastHeard: e.heard, TTL: t.ttlOf(e)}
	if x.State != proto.Offline {
		x.Note = e.note
	}
	return x
}

// All returns every known entry as of now, sorted by key.
func (t *Table) All(now time.Time) []Entry {
	t.mu.Lock()
	out := make([]Entry, 0, len(t.m))
	for k, e := range t.m {
		if e.announced == 0 {
			continue
		}
		out = append(out, t.entryLocked(k, e, now))
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return out
}

// Expire marks members silent for longer than the TTL as expired and
// returns those that just went offline, so the caller can report it once.
func (t *Table) Expire(now time.Time) []proto.PubKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []proto.PubKey
	for k, e := range t.m {
		if e.announced == 0 || e.expired || e.announced == proto.Offline {
			continue
		}
		if now.Sub(e.heard) > t.ttlOf(e) {
			e.expired = true
			out = append(out, k)
		}
	}
	return out
}

// Forget drops k (removed from the roster).
func (t *Table) Forget(k proto.PubKey) {
	t.mu.Lock()
	delete(t.m, k)
	t.mu.Unlock()
}

// Publisher numbers this node's own announcements. Sequence numbers must
// keep rising across restarts even when nothing was persisted, so each new
// number is at least the current Unix time in milliseconds: a restarted
// node's first announcement outranks everything it said before (clocks
// going back by more than the restart gap is the one case this loses).
type Publisher struct {
	mu    sync.Mutex
	seq   uint64              // guarded by mu
	state proto.PresenceState // guarded by mu
}

// NewPublisher starts numbering after last (0 if unknown).
func NewPublisher(last uint64) *Publisher { return &Publisher{seq: last} }

// Next returns the announcement of state at now.
func (p *Publisher) Next(state proto.PresenceState, now time.Time) proto.Presence {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = max(p.seq+1, uint64(now.UnixMilli()))
	p.state = state
	return proto.Presence{State: state, Seq: p.seq}
}

// Current returns the last announced state and its seq.
func (p *Publisher) Current() proto.Presence {
	p.mu.Lock()
	defer p.mu.Unlock()
	return proto.Presence{State: p.state, Seq: p.seq}
}
