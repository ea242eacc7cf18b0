package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/node/outbound"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The send side's counters (node/outbound).
var (
	famSent         = newFamily("meshd_envelopes_sent_total", "Envelopes this node originated, by kind.", "kind")
	famCopies       = newFamily("meshd_envelope_copies_sent_total", "Envelope copies handed to link send queues by fan-out.")
	famForwarded    = newFamily("meshd_envelopes_forwarded_total", "Kept envelopes sent again to a peer that linked.")
	famKept         = newFamily("meshd_envelopes_kept_total", "Direct envelopes kept for a peer that was not linked.")
	famAcked        = newFamily("meshd_envelopes_acked_total", "Kept envelopes a peer acknowledged as stored.")
	famSendDropped  = newFamily("meshd_envelopes_send_dropped_total", "Envelope copies a link refused, by reason.", "reason")
	famSendRefused  = newFamily("meshd_sends_refused_total", "Local sends refused before signing, by reason.", "reason")
	famStoreFailed  = newFamily("meshd_sends_not_kept_total", "Channel messages sent to peers that this node failed to store in its own history.")
	famAckMalformed = newFamily("meshd_acks_malformed_total", "Ack frames that did not parse.")
	famAckUncounted = newFamily("meshd_channel_acks_uncounted_total", "Readers' acks of this node's channel messages not counted, because more than 65,536 were waiting to be.")

	// cTxKind counts "tx.<kind>": envelopes this node originated.
	cTxKind = newKindVec("tx.", famSent)

	// outboundCounters maps each counter of node/outbound to its metric.
	outboundCounters = [outbound.NumCounters]counter{
		outbound.Copies:            newCounter("tx.envelopes", famCopies),
		outbound.Forwarded:         newCounter("tx.forwarded", famForwarded),
		outbound.Kept:              newCounter("tx.queued", famKept),
		outbound.Acked:             newCounter("tx.acked", famAcked),
		outbound.DroppedQueue:      newCounter("tx.dropped.queue", famSendDropped, "queue"),
		outbound.RefusedHopLimit:   newCounter("tx.refused.hop_limit", famSendRefused, "hop_limit"),
		outbound.StoreFailed:       newCounter("tx.store_failed", famStoreFailed),
		outbound.AckMalformed:      newCounter("ack.malformed", famAckMalformed),
		outbound.AckUncounted:      newCounter("ack.reader_uncounted", famAckUncounted),
		outbound.RespondAmbiguous:  newEvent("respond.refused.ambiguous"),
		outbound.Cancels:           newCounter("tx.cancels", famSent, "cancels"),
		outbound.RefusedReplyDepth: newCounter("tx.refused.reply_depth", famSendRefused, "reply_depth"),
		outbound.RespondTwice:      newEvent("respond.refused.twice"),
	}
)

// outboundHost is the node as node/outbound sees it.
type outboundHost struct{ n *Node }

// newOutbound makes the send side over the node's store, sender counter
// and links; queueing (tests) observes the queue.
func newOutbound(n *Node, counter *history.SendCounter, queueing func(linked bool)) *outbound.Sender {
	return outbound.New(outboundHost{n}, outbound.Config{
		Self: n.id.Pub, Key: n.id.Key, Counter: counter, Store: n.store, Peers: n.peers,
		Log: n.log, RateLog: n.logRL.l,
		EnvelopeTTL: n.cfg.EnvelopeTTL, OfflineWindow: n.cfg.OfflineWindow,
		DirectRetention: n.cfg.DirectRetention, MaxReplyDepth: n.cfg.MaxReplyDepth,
		Queueing: queueing,
	})
}

func (h outboundHost) Roster() *roster.Roster                           { return h.n.Roster() }
func (h outboundHost) Acted()                                           { h.n.own.Acted() }
func (h outboundHost) MemberToSend() error                              { return h.n.memberToSend() }
func (h outboundHost) ResolvePeer(q string) (roster.Member, error)      { return h.n.resolvePeer(q) }
func (h outboundHost) ResolveChannel(q string) (*channel.Policy, error) { return h.n.resolveChannel(q) }
func (h outboundHost) MemberLabel(k proto.PubKey) string                { return h.n.memberLabel(k) }
func (h outboundHost) Answered(from proto.PubKey, id uuid.UUID)         { h.n.q.Claims.Answered(from, id) }
func (h outboundHost) Sent(se *proto.SignedEnvelope)                    { mailboxHost(h).sent(se) }
func (h outboundHost) Party(k proto.PubKey) api.Party                   { return h.n.party(k) }
func (h outboundHost) DestText(d proto.Destination) string              { return h.n.destText(d) }
func (h outboundHost) IsLocalItem(se *proto.SignedEnvelope) bool {
	return inboxq.IsLocal(se, h.n.id.Pub)
}
func (h outboundHost) Count(c outbound.Counter, d uint64) { h.n.metrics.add(outboundCounters[c], d) }
func (h outboundHost) CountSent(kind proto.Kind)          { h.n.metrics.inc(cTxKind.of(kind)) }

func (h outboundHost) CountFailed(st history.DeliveryState) { countDeliveryFailed(h.n.metrics, st) }

func (h outboundHost) FailedItems(ses []*proto.SignedEnvelope, at time.Time, wake bool) {
	for _, se := range ses {
		mailboxHost(h).delivered(inboxDelivery{se: se, prio: history.PriorityHigh, wakes: true, at: at})
	}
	h.n.q.Notify(wake)
}

func (h outboundHost) AttachFiles(paths []string) ([]proto.Attachment, error) {
	return h.n.attachFiles(paths)
}

func (h outboundHost) AttachmentNote(id uuid.UUID, r history.DeliveryRecord) string {
	return h.n.attachmentNote(id, r)
}

func (h outboundHost) PreviousKey(k proto.PubKey) (proto.PubKey, bool) {
	return previousKeyOf(h.n.Roster(), k)
}
