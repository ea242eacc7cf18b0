package node

import (
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Drop reasons. Each drop increments the counter "drop.<reason>" and logs
// at debug level. The receive pipeline takes the steps of docs/PROTOCOL.md
// §15, numbered alike in receive: 0 parse, 1 signature, 2 time, 3 roster
// membership, (4, peer announcements, is in handlePeers), 5 destination
// and ACL, 6 request rules, 7 dedupe and deliver; dedupe by a known id
// also runs between 0 and 1, before the costly signature check, except
// for a copy it would acknowledge (§16.3), which is verified first.
const (
	dropMalformed    = "malformed"     // §1.2 steps 1–5: not decodable into the schema
	dropNonCanonical = "non_canonical" // §1.2 step 6: decodable, but not the one canonical encoding
	dropInvalid      = "invalid"       // canonical, but breaks a rule of §4–§6
	dropDuplicate    = "duplicate"
	// dropUnsolicitedResponse: a Response that answers no Request this
	// node sent to its sender.
	dropUnsolicitedResponse = "unsolicited_response"
	dropBadSignature        = "bad_signature"
	dropExpired             = "expired"
	dropFuture              = "future"
	dropNotMember           = "not_member"
	dropUnknownChannel      = "unknown_channel"
	dropNotWriter           = "not_writer"
	dropObserverWrite       = "observer_write"
	dropNotReader           = "not_reader"
	dropMisrouted           = "misrouted"
	dropRoleTooLow          = "role_too_low"
	dropHopLimit            = "hop_limit"
	dropWrongOrg            = "wrong_org"
	dropUnsupported         = "unsupported"
	dropStore               = "store_failed"
)

// rxSource says how an envelope reached us.
type rxSource struct {
	link    *peerLink // the link it came on
	history bool      // part of a history sync response: skips the TTL check
}

// drop counts and logs a dropped envelope.
func (n *Node) drop(reason string, se *proto.SignedEnvelope, src rxSource, err error) {
	if reason == dropDuplicate && src.history {
		// Catch-up pages overlap what we hold by design (a join asks
		// without marks; a page repeats its boundary timestamp): not a
		// drop worth an operator's attention.
		n.metrics.Inc("sync.already_held")
		return
	}
	n.metrics.Inc("drop." + reason)
	attrs := []any{"reason", reason}
	if src.link != nil {
		attrs = append(attrs, "link", src.link.key.Fingerprint())
	}
	if se != nil {
		attrs = append(attrs, "id", se.ID, "from", se.From.Fingerprint(), "kind", se.Kind.String())
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	n.logRL.debug(n.log, "envelope dropped", rxPeer(src, se), reason, attrs...)
}

// receive runs the receive pipeline on one wire envelope and, if it
// passes, delivers it. It reports whether the envelope was delivered.
func (n *Node) receive(raw []byte, src rxSource) bool {
	n.metrics.Inc("rx.envelopes")
	// 0. Parse: size cap, strict decoding, canonical form, validity.
	se, err := proto.ParseEnvelope(raw)
	if err != nil {
		n.drop(parseDropReason(err), nil, src, err)
		return false
	}
	// Step 7's dedupe first where the id is known (§15 allows it): a replay
	// costs a map lookup, not a 56 µs signature check. Presence is deduped
	// by its own seq instead.
	if se.Kind != proto.KindPresence {
		if seen, err := n.store.Seen(se.From, se.ID); err == nil && seen {
			// A re-sent DM we hold already: its sender missed our ack. A
			// copy is acked only if it verifies (§16.3): anyone can forge
			// an unsigned copy of a held id, and an ack for it would tell
			// the sender that bytes it never signed were stored.
			// Channel copies are not acked again: their ack only counts a
			// reader, which the first one did.
			if se.To.Kind == proto.DestPeer && n.ackable(se, src) {
				if err := se.Verify(); err != nil {
					n.drop(dropBadSignature, se, src, err)
					return false
				}
				n.drop(dropDuplicate, se, src, nil)
				n.sendAcks(map[*peerLink][]uuid.UUID{src.link: {se.ID}})
				return false
			}
			n.drop(dropDuplicate, se, src, nil)
			return false
		}
	}
	if n.overBudget(se) {
		n.refuseOverBudget(se, src) // as the commit stage would, unacked
		return false
	}
	// 1. Signature, over the received bytes, by the key in from.
	if err := se.Verify(); err != nil {
		n.drop(dropBadSignature, se, src, err)
		return false
	}
	// 2. TTL and clock skew; history sync skips only the expiry check.
	now := time.Now()
	n.observeFutureClock(se, src, now)
	if se.Time().After(now.Add(proto.MaxClockSkew)) {
		n.drop(dropFuture, se, src, nil)
		return false
	}
	if !src.history && se.Expires().Before(now) {
		n.drop(dropExpired, se, src, nil)
		return false
	}
	if !ttlWithinHorizon(se) {
		n.drop(dropTTLTooLong, se, src, nil)
		return false
	}
	// 3. The sender must be in the current roster.
	r := n.Roster()
	role, ok := r.Role(se.From)
	if !ok {
		n.drop(senderRefusal(r, se.From), se, src, nil)
		return false
	}
	if !src.history {
		// A history envelope says nothing of whether its sender is online.
		n.presence.Touch(se.From, now)
	}
	// 5, 6. Destination and ACL, and the request rules, per kind (step 4,
	// peer announcements, is in handlePeers).
	if reason := n.authorize(r, role, se); reason != "" {
		n.drop(reason, se, src, nil)
		return false
	}
	// A member's channel Messages past its quota here are refused.
	if n.overChannelQuota(se, src, now) {
		return false
	}
	// 7. Dedupe and deliver as passive data.
	return n.deliver(se, src, now)
}

// parseDropReason names the failure class of a [proto.ParseEnvelope]
// error (§1.2). An error inside a JSON-model value is also an invalid
// envelope; its class is what went wrong in the value.
func parseDropReason(err error) string {
	switch {
	case errors.Is(err, proto.ErrHopLimit):
		return dropHopLimit
	case errors.Is(err, proto.ErrNonCanonical):
		return dropNonCanonical
	case errors.Is(err, proto.ErrMalformed), errors.Is(err, proto.ErrTooLarge):
		return dropMalformed
	case errors.Is(err, proto.ErrInvalid):
		return dropInvalid
	}
	return dropMalformed
}

// authorize applies the role and ACL rules; it returns a drop reason or "".
func (n *Node) authorize(r *roster.Roster, role roster.Role, se *proto.SignedEnvelope) string {
	switch se.To.Kind {
	case proto.DestOrg:
		if se.To.Org != r.Org {
			return dropWrongOrg
		}
		if se.Kind != proto.KindPresence {
			return dropUnsupported
		}
		return ""
	case proto.DestPeer:
		if !se.To.Peer.Equal(n.id.Pub) && !n.ownPreviousKey(r, se.To.Peer) {
			return dropMisrouted
		}
		if se.From.Equal(n.id.Pub) {
			// Addressed by this node to itself: a subagent result, which
			// never leaves it. A copy from a link is a replay.
			return dropLocalOnly
		}
	case proto.DestChannel:
		if se.Kind != proto.KindMessage {
			return dropUnsupported
		}
		p, ok := n.channels.ByID(se.To.Channel)
		if !ok {
			return dropUnknownChannel
		}
		if role == roster.RoleObserver {
			return dropObserverWrite
		}
		if !p.CanWrite(r, se.From) {
			return dropNotWriter
		}
		if !p.CanRead(r, n.id.Pub) {
			return dropNotReader
		}
		return ""
	}
	// Peer-addressed kinds.
	switch se.Kind {
	case proto.KindMessage:
		if role == roster.RoleObserver {
			return dropObserverWrite
		}
	case proto.KindResponse:
		if role == roster.RoleObserver {
			return dropObserverWrite
		}
		if n.unsolicited(se) {
			return dropUnsolicitedResponse
		}
	case proto.KindRequest:
		if !role.AtLeast(roster.RoleOperator) {
			return dropRoleTooLow
		}
		if se.Request.Hop > proto.MaxHop {
			return dropHopLimit
		}
	case proto.KindHistoryRequest, proto.KindHistoryResponse:
		return n.syncer.authorize(se)
	default:
		return dropUnsupported
	}
	return ""
}

// rxItem is an admitted envelope on its way to the store.
type rxItem struct {
	se  *proto.SignedEnvelope
	src rxSource
	now time.Time
}

// rxQueueLen bounds admitted envelopes waiting for the commit stage. When
// it is full, link readers wait: backpressure, not loss.
const rxQueueLen = 4096

// maxCommitBatch bounds the envelopes stored in one transaction.
const maxCommitBatch = 512

// deliver hands an admitted envelope to the commit stage; presence only
// updates the table.
func (n *Node) deliver(se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	if se.Kind == proto.KindHistoryRequest || se.Kind == proto.KindHistoryResponse {
		return n.syncer.handle(se, src, now)
	}
	if se.Kind == proto.KindPresence {
		n.observeClock(se, src, now)
		if n.presence.ObserveTTL(se.From, *se.Presence, time.Duration(se.TTL)*time.Second, now) {
			n.logRL.log(n.log, "presence", se.From.Fingerprint(), "presence", "peer", se.From.Fingerprint(), "state", se.Presence.State.String())
		}
		n.metrics.Inc("rx.presence")
		n.metrics.add(cRxPresenceBytes, uint64(1+len(se.Raw)))
		return true
	}
	select {
	case n.rxq <- rxItem{se: se, src: src, now: now}:
		return true
	case <-n.ctx.Done():
		n.drop("shutdown", se, src, nil)
		return false
	}
}

// commitLoop is the commit stage: it stores admitted envelopes from every
// link in batches (one transaction, one fsync pair per batch), then puts
// them in the inbox: subscribed channels (muted ones at low priority
// without waking), DMs, Requests and Responses.
func (n *Node) commitLoop() {
	defer n.wg.Done()
	batch := make([]rxItem, 0, maxCommitBatch)
	for {
		batch = batch[:0]
		select {
		case it := <-n.rxq:
			batch = append(batch, it)
		case <-n.ctx.Done():
			// Store what already arrived, then stop.
			for {
				select {
				case it := <-n.rxq:
					batch = append(batch, it)
					if len(batch) == maxCommitBatch {
						n.commit(batch)
						batch = batch[:0]
					}
					continue
				default:
				}
				break
			}
			if len(batch) > 0 {
				n.commit(batch)
			}
			return
		}
	fill:
		for len(batch) < maxCommitBatch {
			select {
			case it := <-n.rxq:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		n.commit(batch)
	}
}

func (n *Node) commit(batch []rxItem) {
	ds := make([]history.Delivery, len(batch))
	var blocked []bool // set where a blocked member's envelope left the inbox
	for i, it := range batch {
		prio, wakes, inbox := n.classify(it.se)
		if it.se.Kind == proto.KindRequest && it.se.Expires().Before(it.now) {
			// An expired request (from history sync) is never fresh work.
			wakes = false
		}
		if inbox && n.blocks.has(it.se.From) {
			// Stored and acknowledged as ever (the member is not told),
			// but kept out of the inbox and the mailbox.
			inbox, wakes = false, false
			if blocked == nil {
				blocked = make([]bool, len(batch))
			}
			blocked[i] = true
		}
		ds[i] = history.Delivery{Env: it.se, FromHistory: it.src.history, Inbox: inbox, Priority: prio, Wakes: wakes}
	}
	out, err := n.store.Deliver(ds)
	if c := n.committed.Swap(nil); c != nil {
		close(*c) // wake awaitStored
	}
	if err != nil {
		for _, it := range batch {
			n.drop(dropStore, it.se, it.src, err)
		}
		// Once per interval, not once per message: a full disk fails
		// every commit until there is room.
		n.logRL.logAt(n.log, slog.LevelError, "store envelopes", "", dropStore, "count", len(batch), "err", err,
			"hint", "the envelopes are not acknowledged, so their senders keep them and send them again; if the disk is full, free space on the file system of the home (meshctl doctor checks it)")
		return
	}
	n.metrics.Inc("rx.commits")
	now := time.Now()
	wake := false
	var acks map[*peerLink][]uuid.UUID
	for i, it := range batch {
		se, d := it.se, ds[i]
		if out[i] == history.OverBudget {
			// Not stored and not acknowledged: its sender keeps it.
			n.refuseOverBudget(se, it.src)
			continue
		}
		// Peer-addressed envelopes are acknowledged once durable, even
		// when they were duplicates: the sender keeps them until then.
		if n.ackable(se, it.src) {
			if acks == nil {
				acks = map[*peerLink][]uuid.UUID{}
			}
			acks[it.src.link] = append(acks[it.src.link], se.ID)
		}
		if out[i] != history.Added {
			n.drop(dropDuplicate, se, it.src, nil)
			continue
		}
		n.metrics.Inc(deliveredMetric(se.Kind))
		if blocked != nil && blocked[i] {
			n.drop(dropBlocked, se, it.src, nil)
		}
		if se.Kind == proto.KindRequest {
			n.requests.received(se)
		}
		n.replies.note(se.ID, se.Message)
		if !d.Inbox {
			continue
		}
		n.metrics.Inc("inbox.items")
		wake = wake || d.Wakes
		n.test.onDeliver(se, now)
		n.onInbox(inboxDelivery{se: se, prio: d.Priority, wakes: d.Wakes, fromHistory: it.src.history, at: now})
	}
	n.inbox.notify(wake)
	n.sendAcks(acks)
}

// deliveredMetrics holds the counter names "rx.delivered.<kind>" of the
// known kinds, so the commit stage does not build one per envelope.
var deliveredMetrics = func() (m [proto.KindHistoryResponse + 1]string) {
	for k := proto.KindMessage; k <= proto.KindHistoryResponse; k++ {
		m[k] = "rx.delivered." + k.String()
	}
	return m
}()

// deliveredMetric returns the counter name "rx.delivered.<kind>".
func deliveredMetric(k proto.Kind) string {
	if int(k) < len(deliveredMetrics) && deliveredMetrics[k] != "" {
		return deliveredMetrics[k]
	}
	return "rx.delivered." + k.String()
}

// classify returns the inbox priority and wake rule of an envelope, and
// whether it goes to the inbox at all. The wake rules: a Request or a DM
// wakes at high priority, a Response at normal; a Message of a subscribed
// channel wakes at normal priority, of a muted one it is kept at low
// priority without waking; our own words never reach the inbox.
func (n *Node) classify(se *proto.SignedEnvelope) (history.Priority, bool, bool) {
	if se.From.Equal(n.id.Pub) {
		// Our own words, fetched back by catch-up (after a crash or a lost
		// store): history, not mail.
		return 0, false, false
	}
	switch se.Kind {
	case proto.KindRequest:
		return history.PriorityHigh, true, true
	case proto.KindResponse:
		return history.PriorityNormal, true, true
	case proto.KindMessage:
		if se.To.Kind == proto.DestPeer {
			return history.PriorityHigh, true, true
		}
		switch n.subs.Get(se.To.Channel) {
		case channel.Subscribed:
			return history.PriorityNormal, true, true
		case channel.Muted:
			return history.PriorityLow, false, true
		}
	}
	return 0, false, false
}
