package cards

import (
	"context"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Interval spaces the cards taken from one signer: each accepted card
// costs a durable write and a frame on every link, so a member that
// streams new versions must not turn into as many fsyncs and a flood.
// A card that arrives sooner is held as the signer's pending card (a
// newer one replaces it) and taken when the interval has passed: the
// newest card still wins, at most one interval late.
const Interval = time.Second

// pendingCard is a card that came too soon after its signer's last.
type pendingCard struct {
	c    *proto.Card
	from *peers.Link
	due  time.Time
}

// pace reports whether c, from a peer, may be applied now. If not, it
// is kept as its signer's pending card, unless a newer one is pending.
func (b *store) pace(c *proto.Card, from *peers.Link, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last, b.pending = map[proto.PubKey]time.Time{}, map[proto.PubKey]pendingCard{}
	}
	next := b.last[c.Key].Add(Interval)
	if !now.Before(next) {
		if p, ok := b.pending[c.Key]; ok && p.c.Version <= c.Version {
			delete(b.pending, c.Key) // superseded
		}
		// The slot is taken now, not when the card is applied: until its
		// durable write ends, a pending card falling due, or the next
		// frame, would otherwise find the interval still open.
		b.last[c.Key] = now
		return true
	}
	if p, ok := b.pending[c.Key]; !ok || p.c.Version < c.Version {
		b.pending[c.Key] = pendingCard{c: c, from: from, due: next}
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return false
}

// applied records that a card of k was taken at now.
func (b *store) applied(k proto.PubKey, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		b.last, b.pending = map[proto.PubKey]time.Time{}, map[proto.PubKey]pendingCard{}
	}
	b.last[k] = now
}

// due takes the pending cards due at now, and returns when the next one
// is due (zero if none is pending).
func (b *store) due(now time.Time) (out []pendingCard, next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.pending {
		if now.Before(p.due) {
			if next.IsZero() || p.due.Before(next) {
				next = p.due
			}
			continue
		}
		if now.Before(b.last[k].Add(Interval)) {
			// A card taken at once since (see pace): due again later.
			p.due = b.last[k].Add(Interval)
			b.pending[k] = p
			if next.IsZero() || p.due.Before(next) {
				next = p.due
			}
			continue
		}
		out = append(out, p)
		delete(b.pending, k)
		b.last[k] = now
	}
	return out, next
}

// Run applies held-back cards when they are due, until ctx ends.
func (s *Book) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.store.kick:
		case <-t.C:
		}
		ready, next := s.store.due(time.Now())
		for _, p := range ready {
			s.accept(p.c, p.from)
		}
		if !next.IsZero() {
			t.Reset(time.Until(next))
		}
	}
}
