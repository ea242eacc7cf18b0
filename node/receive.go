package node

import (
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The receive pipeline's counters.
var (
	famReceived   = newFamily("meshd_envelopes_received_total", "Envelopes that entered the receive pipeline, before any check.")
	famDelivered  = newFamily("meshd_envelopes_delivered_total", "Envelopes that passed every check, by kind.", "kind")
	famCommits    = newFamily("meshd_rx_commits_total", "Batches committed by the receive commit stage.")
	famInboxItems = newFamily("meshd_inbox_items_total", "Items added to the inbox.")
	famSyncHeld   = newFamily("meshd_sync_envelopes_already_held_total", "Envelopes in catch-up pages that this node already held (not counted as drops).")

	cRxEnvelopes     = newCounter("rx.envelopes", famReceived)
	cRxPresence      = newCounter("rx.presence", famDelivered, "presence")
	cRxPresenceBytes = newEvent("rx.presence_bytes")
	cRxCommits       = newCounter("rx.commits", famCommits)
	cInboxItems      = newCounter("inbox.items", famInboxItems)
	cSyncAlreadyHeld = newCounter("sync.already_held", famSyncHeld)
	// cRxDelivered counts "rx.delivered.<kind>" by envelope kind.
	cRxDelivered = newKindVec("rx.delivered.", famDelivered)
)

// rxSource says how an envelope reached us.
type rxSource struct {
	link    *peers.Link   // the link it came on
	history bool          // part of a history sync response: skips the TTL check
	page    *syncer.Batch // the catch-up page it came in, if any
}

// drop counts and logs a dropped envelope.
func (n *Node) drop(reason dropReason, se *proto.SignedEnvelope, src rxSource, err error) {
	if reason == dropDuplicate && src.history {
		// Catch-up pages overlap what we hold by design (a join asks
		// without marks; a page repeats its boundary timestamp): not a
		// drop worth an operator's attention.
		n.metrics.inc(cSyncAlreadyHeld)
		return
	}
	n.metrics.inc(cDrop.at(reason))
	if reason == dropQuota && src.page != nil && se != nil {
		src.page.Refused(se.From) // catch-up keeps its holes for later
	}
	attrs := []any{"reason", reason.String()}
	if src.link != nil {
		attrs = append(attrs, "link", src.link.Key.Fingerprint())
	}
	if se != nil {
		attrs = append(attrs, "id", se.ID, "from", se.From.Fingerprint(), "kind", se.Kind.String())
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	n.logRL.debug(n.log, "envelope dropped", rxPeer(src, se), reason.String(), attrs...)
}

// receive runs the receive pipeline on one wire envelope and, if it
// passes, delivers it. It reports whether the envelope was delivered.
func (n *Node) receive(raw []byte, src rxSource) bool {
	n.metrics.inc(cRxEnvelopes)
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
			if se.To.Kind == proto.DestPeer && n.out.Ackable(se, src.link, src.history) {
				if err := se.Verify(); err != nil {
					n.drop(dropBadSignature, se, src, err)
					return false
				}
				n.drop(dropDuplicate, se, src, nil)
				n.out.SendAcks(map[*peers.Link][]uuid.UUID{src.link: {se.ID}})
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
	n.doctor.ObserveFutureClock(se.From, se.Time(), src.fromSender(se.From), now)
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
		n.own.Table().Touch(se.From, now)
	}
	// 5, 6. Destination and ACL, and the request rules, per kind (step 4,
	// peer announcements, is in handlePeers).
	if reason := n.authorize(r, role, se); reason != dropNone {
		n.drop(reason, se, src, nil)
		return false
	}
	// A member's channel Messages past its quota here are refused.
	if n.chans.OverQuota(se, src.history, now) {
		n.drop(dropQuota, se, src, nil)
		return false
	}
	// 7. Dedupe and deliver as passive data.
	return n.deliver(se, src, now)
}

// parseDropReason names the failure class of a [proto.ParseEnvelope]
// error (§1.2). An error inside a JSON-model value is also an invalid
// envelope; its class is what went wrong in the value.
func parseDropReason(err error) dropReason {
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

// authorize applies the role and ACL rules; it returns a drop reason or dropNone.
func (n *Node) authorize(r *roster.Roster, role roster.Role, se *proto.SignedEnvelope) dropReason {
	switch se.To.Kind {
	case proto.DestOrg:
		if se.To.Org != r.Org {
			return dropWrongOrg
		}
		if se.Kind != proto.KindPresence {
			return dropUnsupported
		}
		return dropNone
	case proto.DestPeer:
		if !se.To.Peer.Equal(n.id.Pub) && !ownPreviousKey(r, n.id.Pub, se.To.Peer) {
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
		p, ok := n.chans.Set().ByID(se.To.Channel)
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
		return dropNone
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
		return syncDrops[n.syncer.Authorize(se)]
	default:
		return dropUnsupported
	}
	return dropNone
}

// rxItem is an admitted envelope on its way to the store, or (se nil) a
// catch-up page whose envelopes were queued before it: the commit stage
// reports the page stored once it has stored what came before.
type rxItem struct {
	se   *proto.SignedEnvelope
	src  rxSource
	now  time.Time
	page *syncer.Batch
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
		return n.syncer.Handle(se, srcOf(src), now)
	}
	if se.Kind == proto.KindPresence {
		n.doctor.ObserveClock(se.From, se.Time(), src.fromSender(se.From), now)
		if n.own.Table().ObserveTTL(se.From, *se.Presence, time.Duration(se.TTL)*time.Second, now) {
			n.logRL.log(n.log, "presence", se.From.Fingerprint(), "presence", "peer", se.From.Fingerprint(), "state", se.Presence.State.String())
		}
		n.metrics.inc(cRxPresence)
		n.metrics.add(cRxPresenceBytes, uint64(1+len(se.Raw)))
		return true
	}
	select {
	case n.rxq <- rxItem{se: se, src: src, now: now}:
		return true
	case <-n.life.ctx.Done():
		n.drop(dropShutdown, se, src, nil)
		return false
	}
}

// commitLoop is the commit stage: it stores admitted envelopes from every
// link in batches (one transaction, one fsync pair per batch), then puts
// them in the inbox: subscribed channels (muted ones at low priority
// without waking), DMs, Requests and Responses.
func (n *Node) commitLoop() {
	defer n.life.wg.Done()
	batch := make([]rxItem, 0, maxCommitBatch)
	for {
		batch = batch[:0]
		select {
		case it := <-n.rxq:
			batch = append(batch, it)
		case <-n.life.ctx.Done():
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
	batch, pages := takePages(batch)
	batch = n.admitAttachments(batch) // refused past their sender's attachment budget
	if len(batch) == 0 {
		pagesStored(pages)
		return
	}
	ds := make([]history.Delivery, len(batch))
	var blocked []bool // set where a blocked member's envelope left the inbox
	for i, it := range batch {
		prio, wakes, inbox := n.classify(it.se)
		if it.se.Kind == proto.KindRequest && it.se.Expires().Before(it.now) {
			// An expired request (from history sync) is never fresh work.
			wakes = false
		}
		if inbox && n.chans.Blocked(it.se.From) {
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
	pagesStored(pages)
	if err != nil {
		for _, it := range batch {
			n.drop(dropStore, it.se, it.src, err)
		}
		// Once per interval, not once per message: a full disk fails
		// every commit until there is room.
		n.logRL.logAt(n.log, slog.LevelError, "store envelopes", "", dropStore.String(), "count", len(batch), "err", err,
			"hint", "the envelopes are not acknowledged, so their senders keep them and send them again; if the disk is full, free space on the file system of the home (meshctl doctor checks it)")
		return
	}
	n.metrics.inc(cRxCommits)
	now := time.Now()
	wake := false
	var acks map[*peers.Link][]uuid.UUID
	for i, it := range batch {
		se, d := it.se, ds[i]
		if out[i] == history.OverBudget {
			// Not stored and not acknowledged: its sender keeps it.
			n.refuseOverBudget(se, it.src)
			continue
		}
		// Peer-addressed envelopes are acknowledged once durable, even
		// when they were duplicates: the sender keeps them until then.
		if n.out.Ackable(se, it.src.link, it.src.history) {
			if acks == nil {
				acks = map[*peers.Link][]uuid.UUID{}
			}
			acks[it.src.link] = append(acks[it.src.link], se.ID)
		}
		if out[i] != history.Added {
			n.drop(dropDuplicate, se, it.src, nil)
			continue
		}
		n.metrics.inc(cRxDelivered.of(se.Kind))
		if blocked != nil && blocked[i] {
			n.drop(dropBlocked, se, it.src, nil)
		}
		if se.Kind == proto.KindRequest {
			n.out.NoteRequest(se)
		}
		n.out.NoteReply(se.ID, se.Message)
		if !d.Inbox {
			continue
		}
		n.metrics.inc(cInboxItems)
		wake = wake || d.Wakes
		n.test.onDeliver(se, now)
		mailboxHost{n}.delivered(inboxDelivery{se: se, prio: d.Priority, wakes: d.Wakes, fromHistory: it.src.history, at: now})
		n.attach.onDelivered(se, now)
	}
	n.q.Notify(wake)
	n.out.SendAcks(acks)
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
		switch n.chans.Subscriptions().Get(se.To.Channel) {
		case channel.Subscribed:
			return history.PriorityNormal, true, true
		case channel.Muted:
			return history.PriorityLow, false, true
		}
	}
	return 0, false, false
}
