package outbound

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// FlushQueue sends what we keep for a peer: everything it has not yet
// acknowledged. It runs when the peer links and periodically; the peer
// drops what it already holds and acknowledges it again.
func (s *Sender) FlushQueue(pl *peers.Link) {
	pending, err := s.cfg.Store.Pending(pl.Key)
	if err != nil {
		s.log.Error("offline queue", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if prev, ok := s.host.PreviousKey(pl.Key); ok {
		// Kept for the member's previous key, before its rotation: the
		// new key takes it (receive step 5 accepts it).
		old, err := s.cfg.Store.Pending(prev)
		if err != nil {
			s.log.Error("offline queue", "peer", prev.Fingerprint(), "err", err)
		}
		pending = append(pending, old...)
	}
	sent := 0
	for _, se := range pending {
		if err := pl.Conn.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			break
		}
		sent++
	}
	if sent > 0 {
		s.host.Count(Forwarded, uint64(sent))
		s.log.Debug("sent kept messages", "peer", pl.Key.Fingerprint(), "count", sent)
	}
}

// HandleAck drops envelopes the peer has durably stored from its queue.
func (s *Sender) HandleAck(pl *peers.Link, payload []byte) {
	a, err := proto.ParseAck(payload)
	if err != nil {
		s.host.Count(AckMalformed, 1)
		s.log.Warn("bad ack", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if s.acks.allSent(a.IDs) {
		// A reader's acks of our recent channel Messages alone: none
		// names a queue entry (our ids are unique and a channel Message
		// is never queued), so no read transaction looks for one.
		if d := s.acks.add(pl.Key, a.IDs); d > 0 {
			s.host.Count(AckUncounted, uint64(d))
		}
		return
	}
	acked, rest, err := s.cfg.Store.AckQueued(pl.Key, a.IDs)
	if err != nil {
		s.log.Error("ack", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if prev, ok := s.host.PreviousKey(pl.Key); ok && len(rest) > 0 {
		var more int
		if more, rest, err = s.cfg.Store.AckQueued(prev, rest); err != nil {
			s.log.Error("ack", "peer", prev.Fingerprint(), "err", err)
			return
		}
		acked += more
	}
	s.host.Count(Acked, uint64(acked))
	if len(rest) > 0 {
		// Not queued: a reader's acks of our channel Messages, counted
		// in batches (or ids we do not hold, which the count ignores).
		if d := s.acks.add(pl.Key, rest); d > 0 {
			s.host.Count(AckUncounted, uint64(d))
		}
	}
}

// Ackable reports whether se, arriving on via (nil: not on a link) or in
// a history page (fromHistory), is acknowledged once it is stored: a
// peer-addressed envelope to this node that came live on a link from its
// own sender. Acks name ids alone and are scoped to the
// link: an ack on the link to P stands for (P, id), the entry P keeps in
// its queue for us. A peer-addressed envelope relayed by another member
// (meshd never relays) is stored like any other but not acknowledged,
// since the link's peer keeps no such entry and an ack for the id would
// clear an envelope of its own that shares it.
//
// A channel Message that came live on a link from its own sender is
// acknowledged too: the ack names the sender's own envelope, so it never
// clears another, and the sender counts the readers that stored it
// (PROTOCOL §16.3). Older senders ignore the id, which they do not keep.
func (s *Sender) Ackable(se *proto.SignedEnvelope, via *peers.Link, fromHistory bool) bool {
	if via == nil || fromHistory || !se.From.Equal(via.Key) {
		return false
	}
	switch se.To.Kind {
	case proto.DestPeer:
		return se.To.Peer.Equal(s.cfg.Self)
	case proto.DestChannel:
		return se.Kind == proto.KindMessage
	}
	return false
}

// SendAcks acknowledges peer-addressed envelopes stored by one commit,
// per link they came on.
func (s *Sender) SendAcks(acks map[*peers.Link][]uuid.UUID) {
	for pl, ids := range acks {
		for i := 0; i < len(ids); i += proto.MaxArrayElements {
			b, err := proto.Marshal(&proto.Ack{IDs: ids[i:min(i+proto.MaxArrayElements, len(ids))]})
			if err != nil {
				continue
			}
			s.cfg.Peers.Send(s.cfg.Peers.AckVia(pl), proto.FrameAck, b)
		}
	}
}

// readerAcks collects readers' acks of our channel Messages so that they
// are counted in one store write per readerAckInterval, not one per ack
// frame: a busy channel's readers each ack every commit batch.
type readerAcks struct {
	mu      sync.Mutex
	pending map[proto.PubKey][]uuid.UUID // guarded by mu
	n       int                          // ids in pending; guarded by mu
	// ready (capacity 1) says the batch is no longer empty: the loop
	// waits on it, so an idle node's loop never wakes.
	ready chan struct{}
	// sent holds the ids of our last maxSentIDs channel Messages, and
	// ring the same ids in the order they were noted (next: the slot
	// the next one takes), so that their readers' acks skip the queue
	// lookup. Guarded by mu.
	sent map[uuid.UUID]struct{}
	ring []uuid.UUID
	next int
}

// readerAckInterval is how often collected reader acks are counted, and
// maxReaderAcks how many ids wait at most; more are not counted.
const (
	readerAckInterval = 500 * time.Millisecond
	maxReaderAcks     = 1 << 16
	// maxSentIDs is how many of our latest channel Messages' ids are
	// kept for [readerAcks.allSent] (64 KiB): an ack of an older one
	// takes the queue lookup, and is counted the same.
	maxSentIDs = 1 << 12
)

func newReaderAcks() *readerAcks {
	return &readerAcks{pending: map[proto.PubKey][]uuid.UUID{}, ready: make(chan struct{}, 1),
		sent: make(map[uuid.UUID]struct{}, maxSentIDs), ring: make([]uuid.UUID, 0, maxSentIDs)}
}

// noteSent records id as one of our channel Messages, forgetting the
// oldest beyond maxSentIDs.
func (r *readerAcks) noteSent(id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sent[id]; ok {
		return
	}
	if len(r.ring) < maxSentIDs {
		r.ring = append(r.ring, id)
	} else {
		delete(r.sent, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % maxSentIDs
	}
	r.sent[id] = struct{}{}
}

// allSent reports whether every id names one of our recent channel
// Messages (none for an empty list).
func (r *readerAcks) allSent(ids []uuid.UUID) bool {
	if len(ids) == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.sent[id]; !ok {
			return false
		}
	}
	return true
}

// add queues ids acked by reader; it reports how many did not fit.
func (r *readerAcks) add(reader proto.PubKey, ids []uuid.UUID) (dropped int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	room := maxReaderAcks - r.n
	if room < len(ids) {
		dropped, ids = len(ids)-max(room, 0), ids[:max(room, 0)]
	}
	if r.n == 0 && len(ids) > 0 {
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
	r.pending[reader] = append(r.pending[reader], ids...)
	r.n += len(ids)
	return dropped
}

func (r *readerAcks) take() map[proto.PubKey][]uuid.UUID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return nil
	}
	out := r.pending
	r.pending, r.n = map[proto.PubKey][]uuid.UUID{}, 0
	return out
}

// Run counts collected reader acks, readerAckInterval after the first
// of a batch arrived, until ctx ends, and once more then. With no acks
// it sleeps: an idle node's loop does not wake.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTimer(readerAckInterval)
	t.Stop()
	defer t.Stop()
	flush := func() {
		if err := s.cfg.Store.CountReaderAcks(s.acks.take()); err != nil {
			s.log.Warn("count channel acks", "err", err)
		}
	}
	for {
		select {
		case <-s.acks.ready:
		case <-ctx.Done():
			flush()
			return
		}
		t.Reset(readerAckInterval)
		select {
		case <-t.C:
			flush()
		case <-ctx.Done():
			flush()
			return
		}
	}
}
