package outbound

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// Delivery state of what this node sends (docs/PROTOCOL.md §16.6): the
// store keeps a record per sent DM, Request and Response, and per channel
// Message; a kept envelope that expires or is refused unacknowledged
// becomes a delivery_failed item in our own inbox.

// MaxDeliveryRecords bounds the delivery records kept once final; records
// of queued envelopes are bounded by the queues (MaxQueuePerPeer each).
const MaxDeliveryRecords = 100000

// OnDeliveryFailed runs after the store made failures durable: it counts
// them, logs them, and hands the delivery_failed items to the host (the
// mirror and the event stream), waking inbox waiters.
func (s *Sender) OnDeliveryFailed(rs []history.DeliveryRecord) {
	now := time.Now()
	var ses []*proto.SignedEnvelope
	for _, r := range rs {
		s.host.CountFailed(r.State)
		s.warnLimited("a message of ours was not delivered", r.Peer.Fingerprint(), "delivery_"+r.State.String(),
			"id", r.ID, "kind", r.Kind, "to", r.Peer.Fingerprint(), "state", r.State, "reason", r.Reason)
		st, err := s.cfg.Store.Get(s.cfg.Self, r.ID)
		if err != nil {
			s.log.Warn("delivery failure item", "id", r.ID, "err", err)
			continue
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		ses = append(ses, se)
	}
	s.host.FailedItems(ses, now, len(rs) > 0)
}

// FailureOf returns the failed delivery record of our own envelope se, if
// any: the state of a delivery_failed item.
func (s *Sender) FailureOf(se *proto.SignedEnvelope) (history.DeliveryRecord, bool) {
	if !se.From.Equal(s.cfg.Self) || se.To.Kind != proto.DestPeer {
		return history.DeliveryRecord{}, false
	}
	rs, err := s.cfg.Store.DeliveriesOf(se.ID)
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

// MarkFailed turns the rendering of our own envelope x, which reaches the
// inbox only when it failed, into a delivery_failed item.
func (s *Sender) MarkFailed(x *api.Item, se *proto.SignedEnvelope) {
	if !se.From.Equal(s.cfg.Self) || s.host.IsLocalItem(se) {
		return
	}
	x.FailedKind, x.Kind = x.Kind, api.KindDeliveryFailed
	x.Delivery = history.DeliveryExpired.String()
	if r, ok := s.FailureOf(se); ok {
		x.Delivery, x.Reason = r.State.String(), r.Reason
		if note := s.host.AttachmentNote(se.ID, r); note != "" {
			x.Reason = note
		}
	}
}

// Sent lists what this node sent, newest first, with its delivery state.
func (s *Sender) Sent(q api.SentQuery) (*api.SentList, error) {
	if q.Limit < 0 || q.Limit > MaxDeliveryRecords {
		return nil, apierr.BadRequest("limit %d: want 0 to %d", q.Limit, MaxDeliveryRecords)
	}
	rs, err := s.cfg.Store.Deliveries(history.DeliveryFilter{Pending: q.Pending, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := &api.SentList{Items: make([]api.Delivery, 0, len(rs))}
	for _, r := range rs {
		out.Items = append(out.Items, s.renderDelivery(r.ID, []history.DeliveryRecord{r}))
	}
	return out, nil
}

// DeliveryStatus returns what became of the envelope id this node sent,
// at each recipient.
func (s *Sender) DeliveryStatus(id uuid.UUID) (*api.Delivery, error) {
	rs, err := s.cfg.Store.DeliveriesOf(id)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, apierr.NotFound("list what this node sent with: meshctl sent",
			"this node has no record of sending %s (records of delivered messages are kept as long as direct messages, 72 h by default)", id)
	}
	d := s.renderDelivery(id, rs)
	return &d, nil
}

func (s *Sender) renderDelivery(id uuid.UUID, rs []history.DeliveryRecord) api.Delivery {
	r0 := rs[0]
	d := api.Delivery{ID: id.String(), Kind: r0.Kind.String(), Sent: r0.Sent.UTC(), Expires: r0.Expires.UTC()}
	if r0.IsChannel {
		d.To = s.host.DestText(proto.ToChannel(r0.Channel))
		linked, acked := r0.Readers, r0.Acked
		d.LinkedReaders, d.AckedReaders = &linked, &acked
		return d
	}
	d.To = s.host.DestText(proto.ToPeer(r0.Peer))
	for _, r := range rs {
		x := api.DeliveryRecipient{Party: s.host.Party(r.Peer), State: r.State.String(), Reason: r.Reason}
		if note := s.host.AttachmentNote(id, r); note != "" {
			x.Reason = note
		}
		if r.State != history.DeliveryQueued {
			x.At = r.At.UTC()
		}
		d.Recipients = append(d.Recipients, x)
	}
	return d
}

// RefuseQueuedFor gives up what is queued for members the roster no
// longer holds: they will never link again, so their entries are
// refused now rather than left to expire unseen.
func (s *Sender) RefuseQueuedFor(keys []proto.PubKey) {
	for _, k := range keys {
		if _, err := s.cfg.Store.RefuseQueued(k, "the recipient was removed from the roster"); err != nil {
			s.log.Error("refuse queued envelopes of a removed member", "peer", k.Fingerprint(), "err", err)
		}
	}
}

// PruneDeliveries drops delivery records of envelopes no longer queued
// that are older than direct-message retention, and bounds the rest.
func (s *Sender) PruneDeliveries(now time.Time) (int, error) {
	return s.cfg.Store.PruneDeliveries(now.Add(-s.cfg.DirectRetention), MaxDeliveryRecords)
}
