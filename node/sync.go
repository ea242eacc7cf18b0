package node

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// History sync (seed 004, "History Sync"), serving HistoryRequests, and
// the history control endpoints. Retention lives in retention.go.
//
// # Catch-up
//
// A round is due for a channel when a link to one of its readers comes
// up, when we start reading it (a policy we can read is learnt, or we
// subscribe or mute after being unsubscribed), and every SyncInterval.
// Triggers are collected for SyncDelay, then one goroutine runs the due
// channels one after the other. For each channel we may read whose
// policy allows history fetch:
//
//  1. The candidates are the linked readers of the channel: archive
//     peers first, then the peers that wrote to the channel most
//     recently, then the longest-linked.
//  2. The first candidate is asked with our marks (history.SeqMarks) and
//     since_ts = now - our retention for the channel, with max_messages
//     and max_bytes of one page. After a join (a channel we could not
//     read before) the first successful peer is asked without marks, so
//     that the older part of streams we first saw in the middle is filled
//     too. Each answer with `more` is followed by the request
//     history.NextHistoryRequest builds, sent before the page is checked,
//     so that the peer reads the next page while we verify this one,
//     until a page comes without `more`.
//  3. Every envelope of a page goes through the receive pipeline with
//     rxSource{history: true}: every check but the TTL, dedupe by id and
//     per-sender seq tracking happen there, and the commit stage stores
//     it in batches. Anything but a channel Message of the channel asked
//     for is dropped (drop.history_foreign).
//  4. Once the page's envelopes are committed, the next candidate is
//     asked with the updated marks, until SyncPeers candidates have
//     answered; further candidates are asked only while history.Gaps
//     reports holes. When every candidate answered and holes remain, no
//     peer can fill them: history.ForgetGaps gives up on them, so later
//     rounds stop asking for the envelopes above them again.
//
// A sender that lost its state numbers from 1 in a new epoch; tracking is
// per (sender, epoch), so the restart is a new stream, never a replay.
//
// # Serving
//
// A HistoryRequest from any roster member, addressed to us, is answered
// on the link to its sender: history disabled by the policy, the
// requester not a reader, or an unknown channel get the matching status
// and no messages; otherwise history.Store.History answers within the
// request's limits. Per peer at most HistoryServeConcurrency requests are
// served at once (more are dropped) and pages are paced by a token
// bucket, so no peer can make us read the store in a loop. A request id
// seen before is dropped as a replay.
//
// A HistoryResponse is taken only from the peer we sent the request it
// answers to (InReplyTo), for the channel we asked about; anything else is
// dropped (drop.history_unsolicited). Neither kind reaches the store or
// the inbox.

// Drop reasons of history sync; see the drop constants in receive.go.
const (
	dropHistoryUnsolicited = "history_unsolicited" // a response to no request of ours (or from another peer, or too late)
	dropHistoryForeign     = "history_foreign"     // a nested envelope that is not a channel Message of the channel asked for
	dropHistoryOverLimit   = "history_over_limit"  // a response with more messages or bytes than asked for
	dropHistoryBusy        = "history_busy"        // the requester has HistoryServeConcurrency requests served already
	dropHistoryNoLink      = "history_no_link"     // a request from a peer we hold no link to answer on
	dropShutdown           = "shutdown"
)

const (
	// joinCheckInterval is how often the sync loop looks for channels we
	// started reading (policies learnt, subscriptions changed).
	joinCheckInterval = 250 * time.Millisecond
	// storedWait bounds the wait for the commit stage before marks are
	// read for the next peer.
	storedWait = 5 * time.Second
	// maxIdlePages ends paging with a peer after this many pages in a row
	// that brought nothing new: a peer repeating itself cannot keep us
	// busy forever.
	maxIdlePages = 8
	// servedMemory is how many served request ids are remembered to drop
	// replays (an envelope is live for its ttl, 300 s by default).
	servedMemory = 4096
	// maxRoundLog is how many finished rounds are kept for inspection.
	maxRoundLog = 64
	// sendRetry bounds how long a history envelope waits for room in a
	// full link send queue.
	sendRetry = time.Second
)

// syncState is a node's history sync and serving state.
type syncState struct {
	kick chan struct{} // wakes the sync loop when a channel became due

	mu      sync.Mutex
	pending map[uuid.UUID]*outstanding     // guarded by mu: our requests awaiting an answer, by envelope id
	due     map[uuid.UUID]bool             // guarded by mu: channels due for a round
	joins   map[uuid.UUID]bool             // guarded by mu: channels joined and not yet backfilled without marks
	serving map[proto.PubKey]*serveBudget  // guarded by mu
	served  map[uuid.UUID]struct{}         // guarded by mu: request ids served recently
	order   []uuid.UUID                    // guarded by mu: served, oldest first
	rounds  []syncRound                    // guarded by mu: finished rounds, oldest first
	known   map[uuid.UUID]channelReadState // owned by setup, then by the sync loop
}

type channelReadState struct {
	readable bool
	sub      channel.SubState
}

// outstanding is one HistoryRequest of ours awaiting its answer.
type outstanding struct {
	id      uuid.UUID
	peer    proto.PubKey
	channel uuid.UUID
	maxMsgs int
	maxSize int
	answer  chan *proto.SignedEnvelope // buffered 1; receives the one accepted answer
}

// serveBudget paces the history served to one peer.
type serveBudget struct {
	inflight int
	tokens   float64
	last     time.Time
}

// syncRound records one catch-up round of a channel.
type syncRound struct {
	Channel    uuid.UUID
	Join       bool
	Started    time.Time
	Ended      time.Time
	Peers      []syncPeerResult // in the order asked
	Gaps       int              // streams with holes after the round
	ForgotGaps bool
}

// syncPeerResult is what one peer gave in a round.
type syncPeerResult struct {
	Peer      proto.PubKey
	Archive   bool
	Status    proto.HistoryStatus // 0 when it never answered
	Err       string
	Pages     int
	Envelopes int // envelopes received
	Delivered int // envelopes that passed the pipeline (new ones)
}

func (r syncPeerResult) ok() bool { return r.Status == proto.HistoryOK && r.Err == "" }

func newSyncState() *syncState {
	return &syncState{
		kick:    make(chan struct{}, 1),
		pending: map[uuid.UUID]*outstanding{},
		due:     map[uuid.UUID]bool{},
		joins:   map[uuid.UUID]bool{},
		serving: map[proto.PubKey]*serveBudget{},
		served:  map[uuid.UUID]struct{}{},
		known:   map[uuid.UUID]channelReadState{},
	}
}

// hs returns the node's sync state while the node runs; nil once it stopped.
func (n *Node) hs() *syncState {
	if n.ctx.Err() != nil {
		return nil
	}
	return n.hsync
}

// syncConfig is the node's config with zero sync and retention fields
// replaced by the defaults, so a Config built by hand works too.
func (n *Node) syncConfig() Config {
	c, d := n.cfg, DefaultConfig()
	if c.SyncPeers <= 0 {
		c.SyncPeers = d.SyncPeers
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = d.SyncTimeout
	}
	if c.SyncDelay <= 0 {
		c.SyncDelay = d.SyncDelay
	}
	if c.SyncPageMessages <= 0 || c.SyncPageMessages > proto.MaxHistoryMessages {
		c.SyncPageMessages = d.SyncPageMessages
	}
	if c.SyncPageBytes <= 0 || c.SyncPageBytes > proto.MaxHistoryBytes {
		c.SyncPageBytes = d.SyncPageBytes
	}
	if c.HistoryServeConcurrency <= 0 {
		c.HistoryServeConcurrency = d.HistoryServeConcurrency
	}
	if c.HistoryServeRate <= 0 {
		c.HistoryServeRate = d.HistoryServeRate
	}
	if c.HistoryServeBurst <= 0 {
		c.HistoryServeBurst = d.HistoryServeBurst
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = d.RetentionInterval
	}
	if c.ArchiveRetention <= 0 {
		c.ArchiveRetention = d.ArchiveRetention
	}
	if c.ArchiveRetentionMessages <= 0 {
		c.ArchiveRetentionMessages = d.ArchiveRetentionMessages
	}
	if c.DirectRetention <= 0 {
		c.DirectRetention = d.DirectRetention
	}
	if c.EnvelopeTTL <= 0 {
		c.EnvelopeTTL = d.EnvelopeTTL
	}
	return c
}

// ---- admission ----

// authorizeHistory applies the rules for HistoryRequest and
// HistoryResponse envelopes; it returns a drop reason or "". The caller
// has checked that the envelope is addressed to us and that its sender
// is a roster member, which is all a request needs.
func (n *Node) authorizeHistory(_ *roster.Roster, _ roster.Role, se *proto.SignedEnvelope) string {
	if se.Kind != proto.KindHistoryResponse {
		return ""
	}
	s := n.hs()
	if s == nil {
		return dropShutdown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.match(se) == nil {
		return dropHistoryUnsolicited
	}
	return ""
}

// match returns the outstanding request se answers, if se comes from the
// peer asked and names the channel asked about. s.mu must be held.
func (s *syncState) match(se *proto.SignedEnvelope) *outstanding {
	h := se.HistoryResponse
	o := s.pending[h.InReplyTo]
	if o == nil || !o.peer.Equal(se.From) || o.channel != h.ChannelID {
		return nil
	}
	return o
}

// handleHistory serves an admitted HistoryRequest or takes a
// HistoryResponse; it reports whether the envelope was used.
func (n *Node) handleHistory(se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	s := n.hs()
	if s == nil {
		n.drop(dropShutdown, se, src, nil)
		return false
	}
	if se.Kind == proto.KindHistoryRequest {
		return n.takeHistoryRequest(s, se, src, now)
	}
	s.mu.Lock()
	o := s.match(se)
	if o != nil {
		delete(s.pending, o.id)
	}
	s.mu.Unlock()
	if o == nil {
		// Answered already, or given up on between admission and now.
		n.drop(dropHistoryUnsolicited, se, src, nil)
		return false
	}
	o.answer <- se // buffered, and o left pending above: the only send
	n.metrics.Inc("sync.responses")
	return true
}

// ---- serving ----

func (n *Node) takeHistoryRequest(s *syncState, se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	cfg := n.syncConfig()
	n.mu.Lock()
	pl := n.links[se.From]
	n.mu.Unlock()
	if pl == nil {
		n.drop(dropHistoryNoLink, se, src, nil)
		return false
	}
	s.mu.Lock()
	if _, dup := s.served[se.ID]; dup {
		s.mu.Unlock()
		n.drop(dropDuplicate, se, src, nil)
		return false
	}
	b := s.serving[se.From]
	if b == nil {
		b = &serveBudget{tokens: float64(cfg.HistoryServeBurst), last: now}
		s.serving[se.From] = b
	}
	if b.inflight >= cfg.HistoryServeConcurrency {
		s.mu.Unlock()
		n.drop(dropHistoryBusy, se, src, nil)
		return false
	}
	s.served[se.ID] = struct{}{}
	s.order = append(s.order, se.ID)
	if len(s.order) > servedMemory {
		delete(s.served, s.order[0])
		s.order = s.order[1:]
	}
	// Refill, then take a token, going into debt if there is none: the
	// debt is the wait before this page is served.
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(float64(cfg.HistoryServeBurst), b.tokens+el*cfg.HistoryServeRate)
		b.last = now
	}
	b.tokens--
	var wait time.Duration
	if b.tokens < 0 {
		wait = time.Duration(-b.tokens / cfg.HistoryServeRate * float64(time.Second))
		n.metrics.Inc("history.serve_paced")
	}
	b.inflight++
	s.mu.Unlock()
	if n.ctx.Err() != nil {
		s.releaseServe(se.From)
		n.drop(dropShutdown, se, src, nil)
		return false
	}
	n.wg.Add(1)
	go n.serveHistory(s, pl, se, wait)
	return true
}

func (s *syncState) releaseServe(k proto.PubKey) {
	s.mu.Lock()
	if b := s.serving[k]; b != nil {
		b.inflight--
	}
	s.mu.Unlock()
}

// serveHistory answers one HistoryRequest after wait.
func (n *Node) serveHistory(s *syncState, pl *peerLink, se *proto.SignedEnvelope, wait time.Duration) {
	defer n.wg.Done()
	defer s.releaseServe(se.From)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-n.ctx.Done():
			return
		case <-pl.link.Done():
			return
		}
	}
	resp := n.answerHistory(se)
	if resp == nil {
		return
	}
	out, err := n.sign(proto.ToPeer(se.From), proto.KindHistoryResponse, n.syncConfig().EnvelopeTTL, func(e *proto.Envelope) {
		e.HistoryResponse = resp
	})
	if err != nil {
		n.metrics.Inc("history.serve_failed")
		n.log.Error("sign history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	if err := n.sendEnvelope(pl, out); err != nil {
		n.metrics.Inc("history.serve_failed")
		n.log.Warn("send history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	n.metrics.Inc("history.served")
	n.metrics.Add("history.served.envelopes", uint64(len(resp.Messages)))
}

// answerHistory builds the answer to a HistoryRequest; nil when the store
// failed (the requester then times out and asks another peer).
func (n *Node) answerHistory(se *proto.SignedEnvelope) *proto.HistoryResponse {
	req := se.HistoryRequest
	resp := &proto.HistoryResponse{ChannelID: req.ChannelID, InReplyTo: se.ID}
	p, ok := n.channels.ByID(req.ChannelID)
	switch {
	case !ok:
		resp.Status = proto.HistoryUnknownChannel
	case !p.AllowHistory:
		resp.Status = proto.HistoryDisabled
	case !p.CanRead(n.Roster(), se.From):
		resp.Status = proto.HistoryDenied
	default:
		msgs, more, err := n.store.History(req)
		if err != nil {
			n.metrics.Inc("history.serve_failed")
			n.log.Error("read history", "channel", req.ChannelID, "peer", se.From.Fingerprint(), "err", err)
			return nil
		}
		resp.Status, resp.Messages, resp.More = proto.HistoryOK, msgs, more
		return resp
	}
	n.metrics.Inc("history.refused." + statusMetric(resp.Status))
	n.log.Debug("history request refused", "peer", se.From.Fingerprint(), "channel", req.ChannelID, "status", resp.Status.String())
	return resp
}

func statusMetric(st proto.HistoryStatus) string {
	switch st {
	case proto.HistoryOK:
		return "ok"
	case proto.HistoryDisabled:
		return "disabled"
	case proto.HistoryDenied:
		return "denied"
	case proto.HistoryUnknownChannel:
		return "unknown_channel"
	}
	return "status_" + strconv.Itoa(int(st))
}

// sendEnvelope hands se to pl, waiting up to sendRetry for room in a full
// send queue: a history page is worth a short wait, unlike live fan-out.
func (n *Node) sendEnvelope(pl *peerLink, se *proto.SignedEnvelope) error {
	f := append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)
	deadline := time.Now().Add(sendRetry)
	for {
		err := pl.link.Send(f)
		if err == nil || !errors.Is(err, transport.ErrQueueFull) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-pl.link.Done():
			return err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ---- requesting ----

// syncOnLinkUp makes a catch-up round due for every channel the new peer
// and we may both read.
func (n *Node) syncOnLinkUp(pl *peerLink) {
	s := n.hs()
	if s == nil {
		return
	}
	r := n.Roster()
	for _, p := range n.channels.All() {
		if p.AllowHistory && p.CanRead(r, n.id.Pub) && p.CanRead(r, pl.key) {
			s.markDue(p.ID, false)
		}
	}
}

// markDue makes a round due for channel ch; join marks it joined, so its
// next successful round backfills without marks.
func (s *syncState) markDue(ch uuid.UUID, join bool) {
	s.mu.Lock()
	s.due[ch] = true
	if join {
		s.joins[ch] = true
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// startSync starts the goroutines of history sync and retention (each
// registered in n.wg and stopped by n.ctx).
func (n *Node) startSync() {
	s := n.hs()
	if s == nil {
		return
	}
	n.wg.Add(2)
	go n.syncLoop(s)
	go n.retentionLoop()
}

// syncLoop collects triggers and runs catch-up rounds, one at a time.
func (n *Node) syncLoop(s *syncState) {
	defer n.wg.Done()
	cfg := n.syncConfig()
	check := time.NewTicker(joinCheckInterval)
	defer check.Stop()
	var periodic <-chan time.Time
	if cfg.SyncInterval > 0 {
		t := time.NewTicker(cfg.SyncInterval)
		defer t.Stop()
		periodic = t.C
	}
	var due <-chan time.Time
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-s.kick:
			if due == nil {
				due = time.After(cfg.SyncDelay)
			}
		case <-due:
			due = nil
			n.syncRoundAll(s)
		case <-check.C:
			n.checkJoins(s, false)
		case <-periodic:
			r := n.Roster()
			for _, p := range n.channels.All() {
				if p.AllowHistory && p.CanRead(r, n.id.Pub) {
					s.markDue(p.ID, false)
				}
			}
		}
	}
}

// checkJoins finds channels we started reading: a policy we may read that
// is new to us (or newly grants us reading), or a subscription turned on.
// The initial call, made before any link exists, records the channels
// loaded from disk without making rounds due: their history is in the
// store, and link-up rounds catch them up.
func (n *Node) checkJoins(s *syncState, initial bool) {
	r := n.Roster()
	for _, p := range n.channels.All() {
		now := channelReadState{readable: p.CanRead(r, n.id.Pub), sub: n.subs.Get(p.ID)}
		old, seen := s.known[p.ID]
		s.known[p.ID] = now
		if initial || !now.readable || !p.AllowHistory {
			continue
		}
		switch {
		case !seen || !old.readable:
			n.log.Debug("history sync: channel joined", "channel", p.Name)
			s.markDue(p.ID, true)
		case old.sub == channel.Unsubscribed && now.sub != channel.Unsubscribed:
			s.markDue(p.ID, false)
		}
	}
}

// syncRoundAll runs a round for every due channel.
func (n *Node) syncRoundAll(s *syncState) {
	s.mu.Lock()
	var chans []uuid.UUID
	for ch := range s.due {
		chans = append(chans, ch)
	}
	clear(s.due)
	s.mu.Unlock()
	slices.SortFunc(chans, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, ch := range chans {
		if n.ctx.Err() != nil {
			return
		}
		n.syncChannel(s, ch)
	}
}

// syncCandidate is a linked reader we may ask for a channel's history.
type syncCandidate struct {
	pl      *peerLink
	archive bool
	active  time.Time // last time we stored an envelope of theirs in the channel
}

// syncCandidates returns the linked readers of p in the order to ask
// them: archive peers first, then those active in the channel most
// recently, then the longest-linked, then by key.
func (n *Node) syncCandidates(p *channel.Policy, r *roster.Roster) []syncCandidate {
	active := map[proto.PubKey]time.Time{}
	if streams, err := n.store.Gaps(proto.ToChannel(p.ID)); err == nil {
		for _, st := range streams {
			if st.Updated.After(active[st.Sender]) {
				active[st.Sender] = st.Updated
			}
		}
	}
	n.mu.Lock()
	links := n.linkListLocked()
	n.mu.Unlock()
	var out []syncCandidate
	for _, pl := range links {
		m, ok := r.Member(pl.key)
		if !ok || !p.CanRead(r, pl.key) {
			continue
		}
		out = append(out, syncCandidate{pl: pl, archive: m.Archive, active: active[pl.key]})
	}
	slices.SortFunc(out, func(a, b syncCandidate) int {
		switch {
		case a.archive != b.archive:
			if a.archive {
				return -1
			}
			return 1
		case !a.active.Equal(b.active):
			return b.active.Compare(a.active)
		}
		if c := a.pl.link.Established().Compare(b.pl.link.Established()); c != 0 {
			return c
		}
		return bytes.Compare(a.pl.key[:], b.pl.key[:])
	})
	return out
}

// retentionAge is how far back we keep (and so fetch) a channel's history.
func (n *Node) retentionAge(p *channel.Policy, archive bool) time.Duration {
	age, _ := n.retention(p, archive)
	return age
}

// amArchive reports whether the roster marks this node as an archive.
func (n *Node) amArchive(r *roster.Roster) bool {
	m, ok := r.Member(n.id.Pub)
	return ok && m.Archive
}

// syncChannel runs one catch-up round for channel ch.
func (n *Node) syncChannel(s *syncState, ch uuid.UUID) {
	cfg := n.syncConfig()
	p, ok := n.channels.ByID(ch)
	if !ok {
		return
	}
	r := n.Roster()
	if !p.AllowHistory || !p.CanRead(r, n.id.Pub) {
		return
	}
	cands := n.syncCandidates(p, r)
	if len(cands) == 0 {
		return
	}
	s.mu.Lock()
	join := s.joins[ch]
	s.mu.Unlock()
	round := syncRound{Channel: ch, Join: join, Started: time.Now()}
	n.metrics.Inc("sync.rounds")
	since := time.Now().Add(-n.retentionAge(p, n.amArchive(r))).UnixMilli()
	var last *proto.SignedEnvelope // the last envelope handed to the commit stage
	answered, allOK := 0, true
	for _, c := range cands {
		if n.ctx.Err() != nil {
			return
		}
		if answered >= cfg.SyncPeers {
			n.awaitStored(last)
			if n.gapStreams(ch) == 0 {
				break
			}
		}
		req := &proto.HistoryRequest{
			ChannelID:   ch,
			SinceTS:     since,
			MaxMessages: uint32(cfg.SyncPageMessages),
			MaxBytes:    uint32(cfg.SyncPageBytes),
		}
		if !join {
			n.awaitStored(last)
			marks, err := n.store.SeqMarks(ch)
			if err != nil {
				n.log.Error("history sync: read marks", "channel", p.Name, "err", err)
				return
			}
			req.SinceSeqBySender = marks
		}
		res, got := n.pageFrom(s, c.pl, req)
		res.Archive = c.archive
		if got != nil {
			last = got
		}
		round.Peers = append(round.Peers, res)
		if !res.ok() {
			allOK = false
			n.log.Info("history sync: peer did not serve", "channel", p.Name, "peer", c.pl.key.Fingerprint(),
				"status", res.Status.String(), "err", res.Err)
			continue
		}
		answered++
		if join {
			join = false
			s.mu.Lock()
			delete(s.joins, ch)
			s.mu.Unlock()
		}
	}
	n.awaitStored(last)
	round.Gaps = n.gapStreams(ch)
	if round.Gaps > 0 && allOK && len(round.Peers) == len(cands) {
		// Every reader we can reach was asked and none holds the
		// missing numbers (a sender crash skips reserved numbers, say).
		if err := n.store.ForgetGaps(proto.ToChannel(ch)); err != nil {
			n.log.Error("history sync: give up gaps", "channel", p.Name, "err", err)
		} else {
			round.ForgotGaps = true
			n.metrics.Inc("sync.gaps_forgotten")
			n.log.Info("history sync: gaps no peer can fill given up", "channel", p.Name, "streams", round.Gaps)
		}
	}
	round.Ended = time.Now()
	delivered := 0
	for _, pr := range round.Peers {
		delivered += pr.Delivered
	}
	n.log.Debug("history sync round", "channel", p.Name, "peers", len(round.Peers), "delivered", delivered,
		"gaps", round.Gaps, "took", round.Ended.Sub(round.Started))
	s.mu.Lock()
	s.rounds = append(s.rounds, round)
	if len(s.rounds) > maxRoundLog {
		s.rounds = slices.Delete(s.rounds, 0, len(s.rounds)-maxRoundLog)
	}
	s.mu.Unlock()
}

// pageFrom asks pl for req and the pages after it until one comes
// without `more`. It returns what the peer gave and the last envelope it
// handed to the commit stage.
func (n *Node) pageFrom(s *syncState, pl *peerLink, req *proto.HistoryRequest) (res syncPeerResult, last *proto.SignedEnvelope) {
	res.Peer = pl.key
	src := rxSource{link: pl, history: true}
	dest := proto.ToChannel(req.ChannelID)
	o, err := n.sendHistoryRequest(s, pl, req)
	if err != nil {
		res.Err = err.Error()
		return res, nil
	}
	idle := 0
	for o != nil {
		se, err := n.awaitHistory(s, o, pl)
		if err != nil {
			res.Err = err.Error()
			return res, last
		}
		h := se.HistoryResponse
		res.Status = h.Status
		if h.Status != proto.HistoryOK {
			n.metrics.Inc("sync.refused." + statusMetric(h.Status))
			return res, last
		}
		size := 0
		for _, m := range h.Messages {
			size += len(m)
		}
		if len(h.Messages) > o.maxMsgs || size > o.maxSize {
			n.drop(dropHistoryOverLimit, se, rxSource{link: pl}, fmt.Errorf("%d messages, %d bytes; asked for at most %d, %d bytes",
				len(h.Messages), size, o.maxMsgs, o.maxSize))
			res.Err = "answer over the requested limits"
			return res, last
		}
		res.Pages++
		n.metrics.Inc("sync.pages")
		page := make([]*proto.SignedEnvelope, 0, len(h.Messages))
		for _, raw := range h.Messages {
			m, err := proto.ParseEnvelope(raw)
			if err != nil {
				n.drop(dropMalformed, nil, src, err)
				continue
			}
			page = append(page, m)
		}
		// Ask for the next page before checking this one, so the peer
		// reads it while we verify.
		o = nil
		if h.More {
			if next := history.NextHistoryRequest(req, page); next != nil {
				req = next
				if o, err = n.sendHistoryRequest(s, pl, req); err != nil {
					res.Err = err.Error()
				}
			}
		}
		fresh := 0
		for _, m := range page {
			if m.Kind != proto.KindMessage || m.To != dest {
				n.drop(dropHistoryForeign, m, src, nil)
				continue
			}
			res.Envelopes++
			if n.receive(m.Raw, src) {
				fresh++
				last = m
			}
		}
		res.Delivered += fresh
		n.metrics.Add("sync.envelopes", uint64(len(page)))
		if fresh == 0 {
			idle++
		} else {
			idle = 0
		}
		if idle >= maxIdlePages && o != nil {
			s.forget(o)
			o = nil
		}
	}
	return res, last
}

// sendHistoryRequest signs req to pl's peer, records it as outstanding and
// sends it.
func (n *Node) sendHistoryRequest(s *syncState, pl *peerLink, req *proto.HistoryRequest) (*outstanding, error) {
	se, err := n.sign(proto.ToPeer(pl.key), proto.KindHistoryRequest, n.syncConfig().EnvelopeTTL, func(e *proto.Envelope) {
		e.HistoryRequest = req
	})
	if err != nil {
		return nil, fmt.Errorf("sign history request: %w", err)
	}
	o := &outstanding{
		id: se.ID, peer: pl.key, channel: req.ChannelID,
		maxMsgs: int(req.MaxMessages), maxSize: int(req.MaxBytes),
		answer: make(chan *proto.SignedEnvelope, 1),
	}
	s.mu.Lock()
	s.pending[o.id] = o
	s.mu.Unlock()
	if err := n.sendEnvelope(pl, se); err != nil {
		s.forget(o)
		return nil, fmt.Errorf("send history request: %w", err)
	}
	n.metrics.Inc("sync.requests")
	return o, nil
}

// awaitHistory waits for the answer to o. Whatever happens, o is no
// longer outstanding afterwards.
func (n *Node) awaitHistory(s *syncState, o *outstanding, pl *peerLink) (*proto.SignedEnvelope, error) {
	defer s.forget(o)
	t := time.NewTimer(n.syncConfig().SyncTimeout)
	defer t.Stop()
	select {
	case se := <-o.answer:
		return se, nil
	case <-t.C:
		n.metrics.Inc("sync.timeouts")
		return nil, fmt.Errorf("no answer within %v", n.syncConfig().SyncTimeout)
	case <-pl.link.Done():
		return nil, errors.New("link closed")
	case <-n.ctx.Done():
		return nil, n.ctx.Err()
	}
}

func (s *syncState) forget(o *outstanding) {
	s.mu.Lock()
	delete(s.pending, o.id)
	s.mu.Unlock()
}

// awaitStored waits until the commit stage has stored se (and so, as it
// commits in arrival order, everything handed to it before se).
func (n *Node) awaitStored(se *proto.SignedEnvelope) {
	if se == nil {
		return
	}
	deadline := time.Now().Add(storedWait)
	for time.Now().Before(deadline) {
		if seen, err := n.store.Seen(se.From, se.ID); err != nil || seen {
			return
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// gapStreams counts the channel's streams with holes.
func (n *Node) gapStreams(ch uuid.UUID) int {
	streams, err := n.store.Gaps(proto.ToChannel(ch))
	if err != nil {
		return 0
	}
	k := 0
	for _, st := range streams {
		if len(st.Missing) > 0 {
			k++
		}
	}
	return k
}

// syncRounds returns the finished rounds of channel ch, oldest first.
func (n *Node) syncRounds(ch uuid.UUID) []syncRound {
	s := n.hs()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []syncRound
	for _, r := range s.rounds {
		if r.Channel == ch {
			out = append(out, r)
		}
	}
	return out
}

// ---- control endpoints ----

// registerHistory adds the history control endpoints. It runs during
// setup, before any link exists, so it also records which channels the
// node reads at start (see checkJoins): a policy that arrives over a link
// later, however early, is then a join.
func (c *controlServer) registerHistory() {
	if s := c.n.hs(); s != nil {
		c.n.checkJoins(s, true)
	}
	c.mux.HandleFunc("GET /v1/history", c.getHistory)
	c.mux.HandleFunc("GET /v1/sequence", c.getSequence)
}

func (c *controlServer) getHistory(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	name := q.Get("channel")
	if name == "" {
		writeErr(w, http.StatusBadRequest, errors.New("channel is required"), "list channels with: meshctl channel list")
		return
	}
	since, err := api.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		writeErr(w, http.StatusBadRequest, err, "")
		return
	}
	limit := api.DefaultHistoryLimit
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > api.MaxHistoryLimit {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number from 1 to %d", s, api.MaxHistoryLimit), "")
			return
		}
		if v > 0 {
			limit = v
		}
	}
	out, err := c.n.History(name, since, limit)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// History lists the newest limit messages of a channel in our store sent
// at or after since (zero: no bound), oldest first.
func (n *Node) History(name string, since time.Time, limit int) (*api.History, error) {
	p, err := n.resolveChannel(name)
	if err != nil {
		return nil, err
	}
	stored, err := n.store.ChannelMessages(p.ID, since, limit)
	if err != nil {
		return nil, err
	}
	out := &api.History{Channel: p.Name, ChannelID: p.ID.String(), Messages: make([]api.HistoryMessage, 0, len(stored))}
	if st, err := n.store.Stats(); err == nil {
		out.Stored = st.Channels[p.ID]
	}
	for i := range stored {
		m := &stored[i]
		x := api.HistoryMessage{
			ID:          m.ID.String(),
			From:        n.party(m.From),
			Channel:     p.Name,
			Sent:        m.Time().UTC(),
			Received:    m.Received.UTC(),
			Epoch:       m.Epoch.String(),
			Seq:         m.Seq,
			FromHistory: m.FromHistory,
			Size:        m.Size,
		}
		se, err := m.Envelope()
		if err != nil {
			n.log.Warn("stored envelope unreadable", "id", m.ID, "err", err)
			continue
		}
		if se.Message != nil {
			x.Body = se.Message.Body
			if se.Message.InReplyTo != nil {
				x.InReplyTo = se.Message.InReplyTo.String()
			}
		}
		out.Messages = append(out.Messages, x)
	}
	return out, nil
}

func (c *controlServer) getSequence(w http.ResponseWriter, _ *http.Request) {
	n := c.n
	out := api.Sequence{Epoch: n.counter.Epoch().String(), NewEpoch: n.counter.Fresh(), Last: []api.SequenceEntry{}}
	for d, last := range n.counter.Snapshot() {
		out.Last = append(out.Last, api.SequenceEntry{To: n.destText(d), Last: last})
	}
	slices.SortFunc(out.Last, func(a, b api.SequenceEntry) int { return cmp.Compare(a.To, b.To) })
	writeJSON(w, http.StatusOK, out)
}
