package syncer

import (
	"context"
	"sync"

	"github.com/meshd/meshd/proto"
)

// Batch is the envelopes of one catch-up page, handed to the node's
// receive pipeline on [Syncer.Batches]. The syncer does not call into the
// pipeline: the node runs each envelope through it, then reports what
// became of the batch, [Batch.Handed] once every envelope was checked and
// those that passed were queued for the commit stage, and [Batch.Stored]
// once the commit stage has stored them.
type Batch struct {
	// Envelopes are the channel Messages of the channel asked for, in
	// the page's order.
	Envelopes []*proto.SignedEnvelope
	// Src is the link the page came on; History is set.
	Src Source

	fresh      int
	refused    func(sender proto.PubKey) // notes a refusal for the round; nil in tests
	handed     chan struct{}
	stored     chan struct{}
	handedOnce sync.Once
	storedOnce sync.Once
}

func newBatch(envs []*proto.SignedEnvelope, src Source) *Batch {
	return &Batch{Envelopes: envs, Src: src, handed: make(chan struct{}), stored: make(chan struct{})}
}

// Handed reports that every envelope went through the pipeline and fresh
// of them were queued for the commit stage. Only the first call counts.
func (b *Batch) Handed(fresh int) {
	b.handedOnce.Do(func() {
		b.fresh = fresh
		close(b.handed)
	})
}

// Refused reports that the pipeline refused an envelope of the batch from
// sender by a quota of this node (its channel quota, its attachment
// budget): not stored and not remembered as seen, so a later round may
// take it. The round then keeps that sender's holes rather than give them
// up as numbers no peer holds. Safe from any goroutine.
func (b *Batch) Refused(sender proto.PubKey) {
	if b.refused != nil {
		b.refused(sender)
	}
}

// Stored reports that the commit stage is done with every envelope
// queued for it. Only the first call counts.
func (b *Batch) Stored() { b.storedOnce.Do(func() { close(b.stored) }) }

// Batches returns the channel on which the syncer hands catch-up pages
// to the node's receive pipeline. The node reads it until the syncer's
// context ends.
func (s *Syncer) Batches() <-chan *Batch { return s.batches }

// hand gives the envelopes of a page to the node's pipeline and waits
// until they went through it; it returns how many were new and the batch
// (nil when nothing was handed).
func (s *Syncer) hand(envs []*proto.SignedEnvelope, src Source) (int, *Batch) {
	if len(envs) == 0 {
		return 0, nil
	}
	b := newBatch(envs, src)
	ch := envs[0].To.Channel
	b.refused = func(k proto.PubKey) { s.noteRefused(ch, k) }
	select {
	case s.batches <- b:
	case <-s.ctx.Done():
		return 0, nil
	}
	select {
	case <-b.handed:
		return b.fresh, b
	case <-s.ctx.Done():
		return 0, nil
	}
}

// awaitStored waits, up to storedWait, until the commit stage has stored
// b (and so, as it commits in arrival order, everything handed to it
// before b).
func (s *Syncer) awaitStored(b *Batch) {
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, storedWait)
	defer cancel()
	select {
	case <-b.stored:
	case <-ctx.Done():
	}
}
