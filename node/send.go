package node

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The send side's counters.
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
	cTxKind            = newKindVec("tx.", famSent)
	cTxEnvelopes       = newCounter("tx.envelopes", famCopies)
	cTxForwarded       = newCounter("tx.forwarded", famForwarded)
	cTxQueued          = newCounter("tx.queued", famKept)
	cTxAcked           = newCounter("tx.acked", famAcked)
	cTxDroppedQueue    = newCounter("tx.dropped.queue", famSendDropped, "queue")
	cTxRefusedHopLimit = newCounter("tx.refused.hop_limit", famSendRefused, "hop_limit")
	cTxStoreFailed     = newCounter("tx.store_failed", famStoreFailed)
	cAckMalformed      = newCounter("ack.malformed", famAckMalformed)
	cAckUncounted      = newCounter("ack.reader_uncounted", famAckUncounted)
	cRespondAmbiguous  = newEvent("respond.refused.ambiguous")
)

// sign builds, numbers and signs an envelope of ours to d.
func (n *Node) sign(d proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	// HistoryRequests and HistoryResponses are in no stream (§4.4): they
	// are never stored or fetched again, so a number taken from the peer's
	// stream would be a gap that nothing fills.
	var seq uint64
	if kind != proto.KindHistoryRequest && kind != proto.KindHistoryResponse {
		var err error
		if seq, err = n.counter.Next(d); err != nil {
			return nil, fmt.Errorf("sequence number: %w", err)
		}
	}
	e := &proto.Envelope{
		ID:    proto.NewID(),
		From:  n.id.Pub,
		To:    d,
		Kind:  kind,
		TS:    time.Now().UnixMilli(),
		TTL:   uint32(ttl / time.Second),
		Seq:   seq,
		Epoch: n.counter.Epoch(),
	}
	fill(e)
	se, err := proto.SignEnvelope(n.id.Key, e)
	if err != nil {
		if errors.Is(err, proto.ErrHopLimit) {
			return nil, forbidden("%w", err)
		}
		return nil, badRequest("%w", err)
	}
	return se, nil
}

// fanOut hands se to every linked peer in to, and reports who got it.
func (n *Node) fanOut(se *proto.SignedEnvelope, to []proto.PubKey) []string {
	sent := []string{}
	n.peers.Lock()
	var targets []*peers.Link
	for _, k := range to {
		if pl := n.peers.LinkedLocked(k); pl != nil {
			targets = append(targets, pl)
		}
	}
	n.peers.Unlock()
	for _, pl := range targets {
		f := append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)
		err := pl.Conn.Send(f)
		if errors.Is(err, transport.ErrClosed) {
			// The link closed since it was picked: it lost a duplicate
			// pair, or went down. The peer's link now, if another, takes
			// the frame.
			n.peers.Lock()
			cur := n.peers.LinkedLocked(pl.Key)
			n.peers.Unlock()
			if cur != nil && cur != pl {
				err = cur.Conn.Send(f)
			}
		}
		if err != nil {
			n.metrics.inc(cTxDroppedQueue)
			n.log.Warn("send queue refused envelope", "peer", pl.Key.Fingerprint(), "id", se.ID, "err", err)
			continue
		}
		sent = append(sent, pl.Key.Fingerprint())
	}
	n.metrics.add(cTxEnvelopes, uint64(len(sent)))
	return sent
}

// linkedCount returns how many of keys we hold a link to.
func (n *Node) linkedCount(keys []proto.PubKey) int {
	n.peers.Lock()
	defer n.peers.Unlock()
	c := 0
	for _, k := range keys {
		if n.peers.LinkedLocked(k) != nil {
			c++
		}
	}
	return c
}

// resolvePeer finds a roster member by key, fingerprint or name.
func (n *Node) resolvePeer(q string) (roster.Member, error) {
	q = strings.TrimPrefix(strings.TrimSpace(q), "@")
	ms, err := n.Roster().Lookup(q)
	if err != nil {
		var amb *roster.AmbiguousError
		if errors.As(err, &amb) {
			return roster.Member{}, badRequest("%w", err)
		}
		return roster.Member{}, notFound(hintMembers, "%w", err) // the error names q
	}
	if len(ms) == 0 {
		return roster.Member{}, notFound(hintMembers, "no roster member matches %q", q)
	}
	if len(ms) > 1 {
		var names []string
		for _, m := range ms {
			names = append(names, m.Label())
		}
		return roster.Member{}, badRequest("%q is ambiguous: %s", q, strings.Join(names, ", "))
	}
	return ms[0], nil
}

// resolveChannel finds a channel by name (with or without '#') or id.
func (n *Node) resolveChannel(q string) (*channel.Policy, error) {
	p, err := n.channels.Lookup(q)
	if err != nil {
		return nil, notFound(hintChannels, "%w", err) // the error names q
	}
	return p, nil
}

func (n *Node) myRole() roster.Role {
	role, _ := n.Roster().Role(n.id.Pub)
	return role
}

// Send sends a channel message ("#name") or a DM (anything else).
func (n *Node) Send(req api.Send) (*api.Sent, error) {
	n.own.Acted()
	if len(req.Body) > proto.MaxBodySize {
		return nil, refuse(http.StatusBadRequest, "split it into several messages, or send a path or URL to the data",
			"body of %d bytes exceeds the message limit of 256 KiB (%d bytes)", len(req.Body), proto.MaxBodySize)
	}
	var reply *uuid.UUID
	if req.InReplyTo != "" {
		id, err := uuid.Parse(req.InReplyTo)
		if err != nil {
			return nil, badRequest("in_reply_to: %v", err)
		}
		reply = &id
	}
	msg := &proto.Message{Body: req.Body, InReplyTo: reply}
	if err := n.memberToSend(); err != nil {
		return nil, err
	}
	if n.myRole() == roster.RoleObserver {
		return nil, forbidden("role too low: observers may read but not send")
	}
	if err := n.checkReplyDepth(reply); err != nil {
		return nil, err
	}
	var err error
	if msg.Attachments, err = n.attachFiles(req.Attachments); err != nil {
		return nil, err
	}
	var out *api.Sent
	if strings.HasPrefix(req.To, "#") {
		out, err = n.sendChannel(req.To, msg)
	} else {
		out, err = n.sendDirect(req.To, proto.KindMessage, func(e *proto.Envelope) { e.Message = msg })
	}
	if err == nil && reply != nil {
		if id, perr := uuid.Parse(out.ID); perr == nil {
			n.replies.note(id, msg)
		}
	}
	return out, err
}

func (n *Node) sendChannel(name string, msg *proto.Message) (*api.Sent, error) {
	p, err := n.resolveChannel(name)
	if err != nil {
		return nil, err
	}
	r := n.Roster()
	if p.Deleted() {
		return nil, refuse(http.StatusForbidden, hintChannels, "#%s was deleted (policy v%d)", p.Name, p.Version)
	}
	if !p.CanWrite(r, n.id.Pub) {
		return nil, forbidden("not a writer of #%s (writers: %s)", p.Name, principals(p.WriteACL))
	}
	se, err := n.sign(proto.ToChannel(p.ID), proto.KindMessage, n.cfg.EnvelopeTTL, func(e *proto.Envelope) { e.Message = msg })
	if err != nil {
		return nil, err
	}
	// Our own history holds what we said, so we can serve it in sync. The
	// commit runs while the envelope goes out: readers need not wait for
	// our fsync, and the call returns once both are done. If we crash in
	// between, our next catch-up fetches the envelope back from a reader
	// (its number is a gap in our own stream).
	var readers []proto.PubKey
	for _, k := range p.Readers(r) {
		if !k.Equal(n.id.Pub) {
			readers = append(readers, k)
		}
	}
	linked := n.linkedCount(readers)
	stored := make(chan error, 1)
	go func() { stored <- n.store.PutSent(se, linked) }()
	sent := n.fanOut(se, readers)
	if err := <-stored; err != nil {
		n.metrics.inc(cTxStoreFailed)
		n.log.Error("sent a channel message this node could not keep", "id", se.ID, "channel", p.Name, "peers", len(sent), "err", err)
		return nil, fmt.Errorf("store: %w (the message %s went to %d peers, but this node did not keep it)", err, se.ID, len(sent))
	}
	n.metrics.inc(cTxKind.of(proto.KindMessage))
	mailboxHost{n}.sent(se)
	return &api.Sent{ID: se.ID.String(), Kind: se.Kind.String(), To: "#" + p.Name, Seq: se.Seq, SentTo: sent}, nil
}

func principals(ps []channel.Principal) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sendDirect signs a peer-addressed envelope, keeps it for the peer until
// the peer acknowledges it, and sends it if linked. It is signed with the
// store-and-forward window as its TTL whether or not the peer is linked
// (PROTOCOL §16.1): delivery is never confirmed at signing time, and a
// link that looks up may already be dead.
func (n *Node) sendDirect(to string, kind proto.Kind, fill func(*proto.Envelope)) (*api.Sent, error) {
	m, err := n.resolvePeer(to)
	if err != nil {
		return nil, err
	}
	if m.Key.Equal(n.id.Pub) {
		return nil, badRequest("cannot send to this node itself")
	}
	linked := n.linkTo(m.Key) != nil
	se, err := n.sign(proto.ToPeer(m.Key), kind, n.cfg.OfflineWindow, fill)
	if err != nil {
		return nil, err
	}
	n.test.onQueue(linked)
	// Keep it durably until the peer acknowledges it (FrameAck), linked
	// or not: a link can die with the envelope still in its send queue.
	if err := n.store.Enqueue(m.Key, se); err != nil {
		if errors.Is(err, history.ErrQueueFull) {
			return nil, forbidden("the queue for peer %s is full (it has not acknowledged earlier messages): %w", label(m), err)
		}
		return nil, fmt.Errorf("queue for peer: %w", err)
	}
	mailboxHost{n}.sent(se)
	// Send it on a link to the peer, looking again: a link that came up
	// since the check above may have sent the queue before the envelope
	// was in it, and would not send it until its next periodic flush.
	out := &api.Sent{ID: se.ID.String(), Kind: kind.String(), To: "@" + label(m), Seq: se.Seq}
	out.SentTo = n.fanOut(se, []proto.PubKey{m.Key})
	if len(out.SentTo) == 0 {
		n.metrics.inc(cTxQueued)
		out.Queued = true
	}
	n.metrics.inc(cTxKind.of(kind))
	return out, nil
}

func label(m roster.Member) string {
	if m.Name != "" {
		return m.Name
	}
	return m.Key.Fingerprint()
}

// Request sends a Request. Only operators and admins may; a follow-up
// (ReplyTo set) carries the parent's hop + 1, and hop > 3 is refused here
// as at every receiver.
func (n *Node) Request(req api.Request) (*api.Sent, error) {
	n.own.Acted()
	if err := n.memberToSend(); err != nil {
		return nil, err
	}
	if role := n.myRole(); !role.AtLeast(roster.RoleOperator) {
		return nil, forbidden("role too low: %ss may not send requests (operator or admin needed)", role)
	}
	r := &proto.Request{RequestID: proto.NewID(), Intent: req.Intent}
	var err error
	if r.Attachments, err = n.attachFiles(req.Attachments); err != nil {
		return nil, err
	}
	if len(req.Params) > 0 {
		raw, err := proto.JSONToCBOR(req.Params)
		if err != nil {
			return nil, badRequest("params: %w", err)
		}
		r.Params = raw
	}
	if req.ReplyTo != "" {
		parent, err := uuid.Parse(req.ReplyTo)
		if err != nil {
			return nil, badRequest("reply_to: %v", err)
		}
		info, ok, err := n.receivedRequest(parent)
		if err != nil {
			return nil, fmt.Errorf("reply_to: find request %s: %w", parent, err)
		}
		if !ok {
			return nil, notFound(hintMembers, "reply_to: no request %s is known here", parent)
		}
		if int(info.hop)+1 > proto.MaxHop {
			n.metrics.inc(cTxRefusedHopLimit)
			return nil, forbidden("hop limit: a follow-up of a hop-%d request would be hop %d > %d", info.hop, info.hop+1, proto.MaxHop)
		}
		r.ReplyTo = &parent
		r.Hop = info.hop + 1
	}
	out, err := n.sendDirect(req.To, proto.KindRequest, func(e *proto.Envelope) { e.Request = r })
	if err != nil {
		return nil, err
	}
	hop := int(r.Hop)
	out.RequestID, out.Hop = r.RequestID.String(), &hop
	return out, nil
}

// Respond answers a received Request, as a DM to the requester.
func (n *Node) Respond(req api.Respond) (*api.Sent, error) {
	n.own.Acted()
	if err := n.memberToSend(); err != nil {
		return nil, err
	}
	id, err := uuid.Parse(req.RequestID)
	if err != nil {
		return nil, badRequest("request id: %v", err)
	}
	st, err := proto.ParseStatus(req.Status)
	if err != nil {
		return nil, badRequest("%w", err)
	}
	if n.myRole() == roster.RoleObserver {
		return nil, forbidden("role too low: observers may read but not send")
	}
	info, err := n.requester(id, req.To)
	if err != nil {
		return nil, err
	}
	if err := n.checkAnswer(info.from, id); err != nil {
		return nil, err
	}
	resp := &proto.Response{RequestID: id, Status: st}
	if resp.Attachments, err = n.attachFiles(req.Attachments); err != nil {
		return nil, err
	}
	if len(req.Result) > 0 {
		raw, err := proto.JSONToCBOR(req.Result)
		if err != nil {
			return nil, badRequest("result: %w", err)
		}
		resp.Result = raw
	}
	out, err := n.sendDirect(info.from.String(), proto.KindResponse, func(e *proto.Envelope) { e.Response = resp })
	if err != nil {
		return nil, err
	}
	n.answered(info.from, id, st)
	n.claims.Answered(info.from, id)
	out.RequestID = id.String()
	return out, nil
}

// requester picks the received request a response answers: the one
// request with id id, or, when senders reused the id, the one from to
// (a member by name, fingerprint or key). An ambiguous id is refused,
// naming the candidates by sender.
func (n *Node) requester(id uuid.UUID, to string) (requestInfo, error) {
	infos, err := n.receivedRequests(id)
	if err != nil {
		return requestInfo{}, fmt.Errorf("find request %s: %w", id, err)
	}
	if len(infos) == 0 {
		return requestInfo{}, notFound(n.requestIDHint(id), "no received request has id %s", id)
	}
	if strings.TrimPrefix(strings.TrimSpace(to), "@") != "" {
		m, err := n.resolvePeer(to)
		if err != nil {
			return requestInfo{}, err
		}
		for _, in := range infos {
			if in.from.Equal(m.Key) {
				return in, nil
			}
		}
		return requestInfo{}, notFound("list received requests with: meshctl inbox --all", "no request %s came from %s (it came from %s)", id, label(m), n.senderList(infos))
	}
	if len(infos) > 1 {
		n.metrics.inc(cRespondAmbiguous)
		return requestInfo{}, refuse(http.StatusConflict, "name the requester to answer: meshctl respond "+id.String()+" STATUS --to PEER",
			"request id %s is ambiguous: %d members sent a request with it: %s", id, len(infos), n.senderList(infos))
	}
	return infos[0], nil
}

// senderList names requesters by name and fingerprint.
func (n *Node) senderList(infos []requestInfo) string {
	var s []string
	for _, in := range infos {
		s = append(s, n.memberLabel(in.from))
	}
	return strings.Join(s, ", ")
}

// memberLabel is "name (fingerprint)", or the fingerprint alone.
func (n *Node) memberLabel(k proto.PubKey) string {
	if m, ok := n.Roster().Known(k); ok && m.Name != "" {
		return m.Name + " (" + k.Fingerprint() + ")"
	}
	return k.Fingerprint()
}

// flushQueue sends what we keep for a peer: everything it has not yet
// acknowledged. It runs when the peer links and periodically; the peer
// drops what it already holds and acknowledges it again.
func (n *Node) flushQueue(pl *peers.Link) {
	pending, err := n.store.Pending(pl.Key)
	if err != nil {
		n.log.Error("offline queue", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if prev, ok := previousKeyOf(n.Roster(), pl.Key); ok {
		// Kept for the member's previous key, before its rotation: the
		// new key takes it (receive step 5 accepts it).
		old, err := n.store.Pending(prev)
		if err != nil {
			n.log.Error("offline queue", "peer", prev.Fingerprint(), "err", err)
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
		n.metrics.add(cTxForwarded, uint64(sent))
		n.log.Debug("sent kept messages", "peer", pl.Key.Fingerprint(), "count", sent)
	}
}

// handleAck drops envelopes the peer has durably stored from its queue.
func (n *Node) handleAck(pl *peers.Link, payload []byte) {
	a, err := proto.ParseAck(payload)
	if err != nil {
		n.metrics.inc(cAckMalformed)
		n.log.Warn("bad ack", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	acked, rest, err := n.store.AckQueued(pl.Key, a.IDs)
	if err != nil {
		n.log.Error("ack", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if prev, ok := previousKeyOf(n.Roster(), pl.Key); ok && len(rest) > 0 {
		var more int
		if more, rest, err = n.store.AckQueued(prev, rest); err != nil {
			n.log.Error("ack", "peer", prev.Fingerprint(), "err", err)
			return
		}
		acked += more
	}
	n.metrics.add(cTxAcked, uint64(acked))
	if len(rest) > 0 {
		// Not queued: a reader's acks of our channel Messages, counted
		// in batches (or ids we do not hold, which the count ignores).
		if d := n.readerAcks.add(pl.Key, rest); d > 0 {
			n.metrics.add(cAckUncounted, uint64(d))
		}
	}
}

// sendAcks acknowledges peer-addressed envelopes stored by one commit,
// per link they came on.
func (n *Node) sendAcks(acks map[*peers.Link][]uuid.UUID) {
	for pl, ids := range acks {
		ids = uniqueIDs(ids)
		for i := 0; i < len(ids); i += proto.MaxArrayElements {
			b, err := proto.Marshal(&proto.Ack{IDs: ids[i:min(i+proto.MaxArrayElements, len(ids))]})
			if err != nil {
				continue
			}
			n.sendFrame(n.peers.AckVia(pl), proto.FrameAck, b)
		}
	}
}

// uniqueIDs returns ids without repeats, in their first order: ids
// itself when a short list has none (the usual case, without allocating).
func uniqueIDs(ids []uuid.UUID) []uuid.UUID {
	if len(ids) <= 8 {
		i := 1
		for i < len(ids) && !slices.Contains(ids[:i], ids[i]) {
			i++
		}
		if i >= len(ids) {
			return ids
		}
	}
	seen := make(map[uuid.UUID]struct{}, len(ids))
	out := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}
