package proto

import (
	"sync"

	"github.com/google/uuid"
)

// NewEpoch returns a fresh random sender epoch. A sender starts a new epoch
// whenever it cannot prove it remembers its counters (new install, lost
// store), so receivers reset gap tracking instead of seeing a replay.
func NewEpoch() uuid.UUID { return uuid.New() }

// NewID returns a new envelope or request id (UUID v7: time-ordered).
func NewID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// SeqCounter hands out per-destination sender sequence numbers within one
// epoch. Numbers start at 1. It is safe for concurrent use. Persisting it
// is the caller's job (see [SeqCounter.Snapshot] and [RestoreSeqCounter]).
type SeqCounter struct {
	epoch uuid.UUID
	mu    sync.Mutex
	next  map[Destination]uint64 // guarded by mu: last seq handed out per destination
}

// NewSeqCounter starts a counter in a new epoch.
func NewSeqCounter() *SeqCounter {
	return &SeqCounter{epoch: NewEpoch(), next: map[Destination]uint64{}}
}

// RestoreSeqCounter resumes a counter from a snapshot.
func RestoreSeqCounter(epoch uuid.UUID, last map[Destination]uint64) *SeqCounter {
	m := make(map[Destination]uint64, len(last))
	for k, v := range last {
		m[k] = v
	}
	return &SeqCounter{epoch: epoch, next: m}
}

// Epoch returns the counter's epoch.
func (c *SeqCounter) Epoch() uuid.UUID { return c.epoch }

// Next returns the next sequence number for d.
func (c *SeqCounter) Next(d Destination) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next[d]++
	return c.next[d]
}

// Snapshot returns the last number handed out per destination.
func (c *SeqCounter) Snapshot() map[Destination]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[Destination]uint64, len(c.next))
	for k, v := range c.next {
		m[k] = v
	}
	return m
}

// SeqVerdict is what a [SeqTracker] makes of an observed sequence number.
type SeqVerdict uint8

const (
	// SeqNext: the number directly follows the last one seen.
	SeqNext SeqVerdict = iota + 1
	// SeqGap: numbers were skipped; history sync may fill them.
	SeqGap
	// SeqOld: at or below the last seen (a late or duplicate delivery).
	SeqOld
	// SeqNewEpoch: first number seen in this (sender, epoch).
	SeqNewEpoch
)

// SeqKey identifies one sender's stream to one destination in one epoch.
type SeqKey struct {
	From  PubKey
	To    Destination
	Epoch uuid.UUID
}

// SeqTracker follows the highest sequence number seen per (sender,
// destination, epoch). A new epoch starts fresh tracking: a restart of
// numbering in a new epoch is never mistaken for a replay. Not safe for
// concurrent use.
type SeqTracker struct {
	last map[SeqKey]uint64
}

// NewSeqTracker returns an empty tracker.
func NewSeqTracker() *SeqTracker { return &SeqTracker{last: map[SeqKey]uint64{}} }

// Observe records seq and classifies it.
func (t *SeqTracker) Observe(k SeqKey, seq uint64) SeqVerdict {
	last, ok := t.last[k]
	switch {
	case !ok:
		t.last[k] = seq
		return SeqNewEpoch
	case seq <= last:
		return SeqOld
	case seq == last+1:
		t.last[k] = seq
		return SeqNext
	default:
		t.last[k] = seq
		return SeqGap
	}
}

// Last returns the highest seq seen for k.
func (t *SeqTracker) Last(k SeqKey) (uint64, bool) {
	v, ok := t.last[k]
	return v, ok
}
