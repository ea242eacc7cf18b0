package node

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/proto"
)

// The delivery failures' counters, by the state the envelope ended in.
var (
	famDeliveryFailed = newFamily("meshd_deliveries_failed_total", "Kept DMs, requests and responses of this node that will never be delivered (its sender got a delivery_failed item), by state.", "state")

	cTxFailedExpired = newCounter("tx.failed.expired", famDeliveryFailed, "expired")
	cTxFailedRefused = newCounter("tx.failed.refused", famDeliveryFailed, "refused")
)

// countDeliveryFailed counts "tx.failed.<state>". Only expired and
// refused records come here; another state would be counted by name.
func countDeliveryFailed(m *Metrics, st history.DeliveryState) {
	switch st {
	case history.DeliveryExpired:
		m.inc(cTxFailedExpired)
	case history.DeliveryRefused:
		m.inc(cTxFailedRefused)
	default:
		m.Inc("tx.failed." + st.String())
	}
}

// Delivery state of what this node sends (docs/PROTOCOL.md §16.6): the
// store keeps a record per sent DM, Request and Response, and per channel
// Message; a kept envelope that expires or is refused unacknowledged
// becomes a delivery_failed item in our own inbox.

// maxDeliveryRecords bounds the delivery records kept once final; records
// of queued envelopes are bounded by the queues (MaxQueuePerPeer each).
const maxDeliveryRecords = 100000

// onDeliveryFailed runs after the store made failures durable: it counts
// them, logs them, wakes inbox waiters and hands the items to the mirror
// and the event stream.
func (n *Node) onDeliveryFailed(rs []history.DeliveryRecord) {
	now := time.Now()
	for _, r := range rs {
		countDeliveryFailed(n.metrics, r.State)
		n.logRL.warn(n.log, "a message of ours was not delivered", r.Peer.Fingerprint(), "delivery_"+r.State.String(),
			"id", r.ID, "kind", r.Kind, "to", r.Peer.Fingerprint(), "state", r.State, "reason", r.Reason)
		st, err := n.store.Get(n.id.Pub, r.ID)
		if err != nil {
			n.log.Warn("delivery failure item", "id", r.ID, "err", err)
			continue
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		mailboxHost{n}.delivered(inboxDelivery{se: se, prio: history.PriorityHigh, wakes: true, at: now})
	}
	n.q.Notify(len(rs) > 0)
}

// failureOf returns the failed delivery record of our own envelope se, if
// any: the state of a delivery_failed item.
func (n *Node) failureOf(se *proto.SignedEnvelope) (history.DeliveryRecord, bool) {
	if !se.From.Equal(n.id.Pub) || se.To.Kind != proto.DestPeer {
		return history.DeliveryRecord{}, false
	}
	rs, err := n.store.DeliveriesOf(se.ID)
	if err != nil {
		return history.DeliveryRecord{}, false
	}
	for _, r := range rs {
		if r.Peer.Equal(se.To.Peer) && r.State.Failed() {
			return r, true
		}
	}
	return history.DeliveryRecord{}, false
}

// markFailed turns the rendering of our own envelope x, which reaches the
// inbox only when it failed, into a delivery_failed item.
func (n *Node) markFailed(x *api.Item, se *proto.SignedEnvelope) {
	if !se.From.Equal(n.id.Pub) || inboxq.IsLocal(se, n.id.Pub) {
		return
	}
	x.FailedKind, x.Kind = x.Kind, api.KindDeliveryFailed
	x.Delivery = history.DeliveryExpired.String()
	if r, ok := n.failureOf(se); ok {
		x.Delivery, x.Reason = r.State.String(), r.Reason
		if note := n.attachmentNote(se.ID, r); note != "" {
			x.Reason = note
		}
	}
}

// Sent lists what this node sent, newest first, with its delivery state.
func (n *Node) Sent(q api.SentQuery) (*api.SentList, error) {
	if q.Limit < 0 || q.Limit > maxDeliveryRecords {
		return nil, badRequest("limit %d: want 0 to %d", q.Limit, maxDeliveryRecords)
	}
	rs, err := n.store.Deliveries(history.DeliveryFilter{Pending: q.Pending, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := &api.SentList{Items: make([]api.Delivery, 0, len(rs))}
	for _, r := range rs {
		out.Items = append(out.Items, n.renderDelivery(r.ID, []history.DeliveryRecord{r}))
	}
	return out, nil
}

// DeliveryStatus returns what became of the envelope id this node sent,
// at each recipient.
func (n *Node) DeliveryStatus(id uuid.UUID) (*api.Delivery, error) {
	rs, err := n.store.DeliveriesOf(id)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, notFound("list what this node sent with: meshctl sent",
			"this node has no record of sending %s (records of delivered messages are kept as long as direct messages, 72 h by default)", id)
	}
	d := n.renderDelivery(id, rs)
	return &d, nil
}

func (n *Node) renderDelivery(id uuid.UUID, rs []history.DeliveryRecord) api.Delivery {
	r0 := rs[0]
	d := api.Delivery{ID: id.String(), Kind: r0.Kind.String(), Sent: r0.Sent.UTC(), Expires: r0.Expires.UTC()}
	if r0.IsChannel {
		d.To = n.destText(proto.ToChannel(r0.Channel))
		linked, acked := r0.Readers, r0.Acked
		d.LinkedReaders, d.AckedReaders = &linked, &acked
		return d
	}
	d.To = n.destText(proto.ToPeer(r0.Peer))
	for _, r := range rs {
		x := api.DeliveryRecipient{Party: n.party(r.Peer), State: r.State.String(), Reason: r.Reason}
		if note := n.attachmentNote(id, r); note != "" {
			x.Reason = note
		}
		if r.State != history.DeliveryQueued {
			x.At = r.At.UTC()
		}
		d.Recipients = append(d.Recipients, x)
	}
	return d
}

// refuseQueuedFor gives up what is queued for members the roster no
// longer holds: they will never link again, so their entries are
// refused now rather than left to expire unseen.
func (n *Node) refuseQueuedFor(keys []proto.PubKey) {
	for _, k := range keys {
		if _, err := n.store.RefuseQueued(k, "the recipient was removed from the roster"); err != nil {
			n.log.Error("refuse queued envelopes of a removed member", "peer", k.Fingerprint(), "err", err)
		}
	}
}

// pruneDeliveries drops delivery records of envelopes no longer queued
// that are older than direct-message retention, and bounds the rest.
func (n *Node) pruneDeliveries(now time.Time) (int, error) {
	return n.store.PruneDeliveries(now.Add(-n.cfg.DirectRetention), maxDeliveryRecords)
}

// readerAcks collects readers' acks of our channel Messages so that they
// are counted in one store write per readerAckInterval, not one per ack
// frame: a busy channel's readers each ack every commit batch.
type readerAcks struct {
	mu      sync.Mutex
	pending map[proto.PubKey][]uuid.UUID // guarded by mu
	n       int                          // ids in pending; guarded by mu
	kick    chan struct{}
}

// readerAckInterval is how often collected reader acks are counted, and
// maxReaderAcks how many ids wait at most; more are not counted.
const (
	readerAckInterval = 500 * time.Millisecond
	maxReaderAcks     = 1 << 16
)

func newReaderAcks() *readerAcks {
	return &readerAcks{pending: map[proto.PubKey][]uuid.UUID{}, kick: make(chan struct{}, 1)}
}

// add queues ids acked by reader; it reports how many did not fit.
func (r *readerAcks) add(reader proto.PubKey, ids []uuid.UUID) (dropped int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	room := maxReaderAcks - r.n
	if room < len(ids) {
		dropped, ids = len(ids)-max(room, 0), ids[:max(room, 0)]
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

// readerAckLoop counts collected reader acks until the node stops, and
// once more then.
func (n *Node) readerAckLoop() {
	defer n.wg.Done()
	t := time.NewTicker(readerAckInterval)
	defer t.Stop()
	flush := func() {
		if err := n.store.CountReaderAcks(n.readerAcks.take()); err != nil {
			n.log.Warn("count channel acks", "err", err)
		}
	}
	for {
		select {
		case <-t.C:
			flush()
		case <-n.ctx.Done():
			flush()
			return
		}
	}
}
