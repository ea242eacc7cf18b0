package node

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The catch-up rounds' counters.
var (
	famSyncRounds    = newFamily("meshd_sync_rounds_total", "History catch-up rounds.")
	famSyncResponses = newFamily("meshd_sync_responses_total", "History responses received.")
	famSyncGaps      = newFamily("meshd_sync_gaps_forgotten_total", "Catch-up rounds that gave up gaps no peer could fill.")

	cSyncRounds        = newCounter("sync.rounds", famSyncRounds)
	cSyncResponses     = newCounter("sync.responses", famSyncResponses)
	cSyncGapsForgotten = newCounter("sync.gaps_forgotten", famSyncGaps)
)

// History sync ("History Sync" of the protocol), serving HistoryRequests.
// The [syncer] owns both; retention lives in retention.go.
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
//  1. The candidates are the linked readers of the channel: the peers
//     that wrote to the channel most recently first, then archive peers
//     and admins as the fallback, then the longest-linked.
//  2. The first candidate is asked with our marks (history.SeqMarks) and
//     since_ts = now - our retention for the channel, with max_messages
//     and max_bytes of one page. After a join (a channel we could not
//     read before) the first successful peer is asked without marks, so
//     that the older part of streams we first saw in the middle is filled
//     too. Each answer with `more` is followed by the request
//     history.NextHistoryRequest builds, sent before the page is checked,
//     so that the peer reads the next page while we verify this one,
//     until a page comes without `more`. Paging that stops early (a
//     timeout, a closed link, maxRoundPages) resumes there in the next
//     round, and a page that comes after its wait timed out is still
//     used (syncer_page.go). A cursor's marks may have passed holes: in
//     a full round, once resumed paging with a peer reaches its last
//     page and holes remain, that peer is asked again from our marks.
//  3. Every envelope of a page goes through the receive pipeline with
//     rxSource{history: true}: every check but the TTL, dedupe by id and
//     per-sender seq tracking happen there, and the commit stage stores
//     it in batches. Anything but a channel Message of the channel asked
//     for is dropped (drop.history_foreign).
//  4. Once the page's envelopes are committed, the next candidate is
//     asked with the updated marks, until SyncPeers candidates have
//     answered; further candidates are asked only while history.Gaps
//     reports holes. When every candidate served every page and holes
//     remain, the holes of streams whose sender was among them (or is
//     us, or left) are given up (history.ForgetGaps), so later rounds
//     stop asking for the envelopes above them again; the holes of a
//     sender not linked now are kept until it links (giveUpGaps).
//
// A sender that lost its state numbers from 1 in a new epoch; tracking is
// per (sender, epoch), so the restart is a new stream, never a replay.
//
// Every wait is on an event: an answer arriving, the commit stage
// storing a batch, room in a link's send queue, bounded by a deadline and
// by the syncer's context. Nothing polls.
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

const (
	// storedWait bounds the wait for the commit stage before marks are
	// read for the next peer.
	storedWait = 5 * time.Second
	// maxRoundPages pauses paging with a peer after this many pages in
	// one round: the round moves on, and the next round, made due at
	// once, resumes where paging paused (see syncer_page.go).
	maxRoundPages = 200
	// servedMemory is how many served request ids are remembered to drop
	// replays (an envelope is live for its ttl, 300 s by default).
	servedMemory = 4096
	// sendWait bounds how long a history envelope waits for room in a
	// full link send queue.
	sendWait = time.Second
)

// syncHost is what the [syncer] sees of the node: the roster, the links,
// signing, and the receive pipeline. The store, the channel policies and
// the subscriptions it reads directly.
type syncHost interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// linkTo returns the link to k, or nil.
	linkTo(k proto.PubKey) *peers.Link
	// linkList returns every link.
	linkList() []*peers.Link
	// sign builds, numbers and signs an envelope of ours.
	sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error)
	// receive runs a wire envelope through the receive pipeline and
	// reports whether it was handed to the commit stage.
	receive(raw []byte, src rxSource) bool
	// awaitStored waits until the commit stage stored se, or ctx is done.
	awaitStored(ctx context.Context, se *proto.SignedEnvelope)
	// drop counts and logs a dropped envelope.
	drop(reason dropReason, se *proto.SignedEnvelope, src rxSource, err error)
	// roundDone observes a finished catch-up round (tests do).
	roundDone(r syncRound)
}

// syncer runs history sync and serves peers' HistoryRequests. It owns its
// goroutines: [syncer.start] starts them and [syncer.close] stops them
// and waits.
type syncer struct {
	host     syncHost
	cfg      *Config // the node's, defaults applied; read-only
	self     proto.PubKey
	store    *history.Store
	channels *channel.Set
	subs     *channel.Subscriptions
	metrics  *Metrics
	log      *slog.Logger

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the sync loop and every serving goroutine
	closeOnce sync.Once

	kick     chan struct{} // wakes the sync loop when a channel became due
	recheck  chan struct{} // wakes the sync loop to look for joined channels
	lateKick chan struct{} // wakes the sync loop to use late answers

	// known is what the sync loop last saw of each channel, to tell a
	// join. Owned by newSyncer, then by the sync loop.
	known map[uuid.UUID]channelReadState

	// mu guards what requesting and serving share with the receive path.
	mu      sync.Mutex
	pending map[uuid.UUID]*outstanding // our requests awaiting an answer, by envelope id
	due     map[uuid.UUID]bool         // channels due for a round: true a full one, false only to resume paging
	joins   map[uuid.UUID]bool         // channels joined and not yet backfilled without marks
	// backfill: the store asked for a backfill of every channel, and
	// some join is left (loadBackfill).
	backfill bool
	serving  map[proto.PubKey]*serveBudget // what each peer is being served
	served   *fifoMap[envRef, struct{}]    // requests (from, id) served recently
	cursors  map[cursorKey]*cursor         // where paging with a peer stopped, to resume
	late     []lateAnswer                  // late answers for the sync loop to use
}

type channelReadState struct {
	readable bool
	sub      channel.SubState
}

// outstanding is one HistoryRequest of ours awaiting its answer.
type outstanding struct {
	id      uuid.UUID
	peer    proto.PubKey
	pl      *peers.Link
	channel uuid.UUID
	req     *proto.HistoryRequest
	maxMsgs int
	maxSize int
	answer  chan *proto.SignedEnvelope // buffered 1; receives the one accepted answer
	// late: the wait for the answer timed out. The request stays
	// outstanding until expires (the request envelope's own expiry), and
	// an answer that comes by then is used by the sync loop.
	late    bool
	expires time.Time
}

// serveBudget paces the history served to one peer.
type serveBudget struct {
	inflight int           // requests being served
	pages    *rate.Limiter // HistoryServeRate pages/s, bursts of HistoryServeBurst
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
	// Paused: paging stopped at maxRoundPages with more to come; the
	// next round resumes it.
	Paused  bool
	Resumed bool // paging started from where an earlier one stopped
	// LinkLost: the link closed under the paging (see syncChannel).
	LinkLost bool `json:"-"`
}

// ok reports whether the peer served without error.
func (r syncPeerResult) ok() bool { return r.Status == proto.HistoryOK && r.Err == "" }

// complete reports whether the peer served every page up to the last.
func (r syncPeerResult) complete() bool { return r.ok() && !r.Paused }

// newSyncer returns a syncer for n; ctx bounds its life. It records which
// channels the node reads now, before any link exists (see checkJoins): a
// policy that arrives over a link later, however early, is then a join.
func newSyncer(ctx context.Context, n *Node) *syncer {
	s := &syncer{
		host:     n,
		cfg:      &n.cfg,
		self:     n.id.Pub,
		store:    n.store,
		channels: n.channels,
		subs:     n.subs,
		metrics:  n.metrics,
		log:      n.log.With("component", "sync"),
		kick:     make(chan struct{}, 1),
		recheck:  make(chan struct{}, 1),
		lateKick: make(chan struct{}, 1),
		cursors:  map[cursorKey]*cursor{},
		known:    map[uuid.UUID]channelReadState{},
		pending:  map[uuid.UUID]*outstanding{},
		due:      map[uuid.UUID]bool{},
		joins:    map[uuid.UUID]bool{},
		serving:  map[proto.PubKey]*serveBudget{},
		served:   newFIFOMap[envRef, struct{}](servedMemory),
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.checkJoins(true)
	s.loadBackfill()
	return s
}

// loadBackfill treats every channel we read as joined when the store asks
// for a backfill (meshctl repair rebuilt it): each one's first round asks
// without marks too. The store's flag is cleared once no join is left.
func (s *syncer) loadBackfill() {
	on, err := s.store.Backfill()
	if err != nil || !on {
		return
	}
	r := s.host.Roster()
	for _, p := range s.channels.All() {
		if p.AllowHistory && p.CanRead(r, s.self) {
			s.joins[p.ID] = true
		}
	}
	s.backfill = true
	s.log.Info("history sync: the store was rebuilt; every channel backfills in its first round", "channels", len(s.joins))
	s.endBackfill()
}

// endBackfill clears the store's backfill flag once no join is left.
func (s *syncer) endBackfill() {
	s.mu.Lock()
	done := s.backfill && len(s.joins) == 0
	if done {
		s.backfill = false
	}
	s.mu.Unlock()
	if done {
		if err := s.store.SetBackfill(false); err != nil {
			s.log.Error("history sync: clear the backfill flag", "err", err)
		}
	}
}

// start starts the sync loop.
func (s *syncer) start() {
	s.wg.Add(1)
	go s.loop()
}

// close stops the sync loop and every serving goroutine, and waits for
// them. It is idempotent.
func (s *syncer) close() {
	s.closeOnce.Do(func() {
		// Cancelled under mu, so takeRequest cannot add a serving
		// goroutine after the Wait below began.
		s.mu.Lock()
		s.cancel()
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// running reports whether the syncer has not been closed.
func (s *syncer) running() bool { return s.ctx.Err() == nil }

// ---- admission ----

// authorize applies the rules for HistoryRequest and HistoryResponse
// envelopes; it returns a drop reason or dropNone. The caller has checked that
// the envelope is addressed to us and that its sender is a roster member,
// which is all a request needs.
func (s *syncer) authorize(se *proto.SignedEnvelope) dropReason {
	if se.Kind != proto.KindHistoryResponse {
		return dropNone
	}
	if !s.running() {
		return dropShutdown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.matchLocked(se) == nil {
		return dropHistoryUnsolicited
	}
	return dropNone
}

// matchLocked returns the outstanding request se answers, if se comes
// from the peer asked and names the channel asked about, and the request
// has not expired.
func (s *syncer) matchLocked(se *proto.SignedEnvelope) *outstanding {
	h := se.HistoryResponse
	o := s.pending[h.InReplyTo]
	if o == nil || !o.peer.Equal(se.From) || o.channel != h.ChannelID {
		return nil
	}
	if o.late && !time.Now().Before(o.expires) {
		return nil
	}
	return o
}

// handle serves an admitted HistoryRequest or takes a HistoryResponse;
// it reports whether the envelope was used.
func (s *syncer) handle(se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	if !s.running() {
		s.host.drop(dropShutdown, se, src, nil)
		return false
	}
	if se.Kind == proto.KindHistoryRequest {
		return s.takeRequest(se, src, now)
	}
	s.mu.Lock()
	o := s.matchLocked(se)
	if o != nil {
		delete(s.pending, o.id)
	}
	s.mu.Unlock()
	if o == nil {
		// Answered already, or given up on between admission and now.
		s.host.drop(dropHistoryUnsolicited, se, src, nil)
		return false
	}
	s.metrics.inc(cSyncResponses)
	if o.late {
		s.queueLate(o, se)
		return true
	}
	o.answer <- se // buffered, and o left pending above: the only send
	return true
}

// send hands se to pl, waiting up to sendWait for room in a full send
// queue: a history page is worth a short wait, unlike live fan-out.
func (s *syncer) send(pl *peers.Link, se *proto.SignedEnvelope) error {
	ctx, cancel := context.WithTimeout(s.ctx, sendWait)
	defer cancel()
	return pl.Conn.SendWait(ctx, append([]byte{byte(proto.FrameEnvelope)}, se.Raw...))
}

// ---- requesting ----

// onLinkUp makes a catch-up round due for every channel the new peer and
// we may both read.
func (s *syncer) onLinkUp(pl *peers.Link) {
	if !s.running() {
		return
	}
	r := s.host.Roster()
	for _, p := range s.channels.All() {
		if p.AllowHistory && p.CanRead(r, s.self) && p.CanRead(r, pl.Key) {
			s.markDue(p.ID, false)
		}
	}
}

// markDue makes a round due for channel ch; join marks it joined, so its
// next successful round backfills without marks.
func (s *syncer) markDue(ch uuid.UUID, join bool) {
	s.mu.Lock()
	s.due[ch] = true
	if join {
		s.joins[ch] = true
	}
	s.mu.Unlock()
	s.wake()
}

// markResume makes a round due for channel ch that only resumes paging
// where it stopped (the peers with a cursor), unless a full round is due
// already. A page that says more thus moves paging on with that peer
// alone, without starting the other peers' paging again.
func (s *syncer) markResume(ch uuid.UUID) {
	s.mu.Lock()
	if _, ok := s.due[ch]; !ok {
		s.due[ch] = false
	}
	s.mu.Unlock()
	s.wake()
}

func (s *syncer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// channelsChanged tells the sync loop that what we may read or follow may
// have changed: a policy was learnt, a subscription set, the roster
// updated. The loop then looks for channels we joined (checkJoins).
func (s *syncer) channelsChanged() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}

// loop collects triggers and runs catch-up rounds, one at a time.
func (s *syncer) loop() {
	defer s.wg.Done()
	var periodic <-chan time.Time
	if s.cfg.SyncInterval > 0 {
		t := time.NewTicker(s.cfg.SyncInterval)
		defer t.Stop()
		periodic = t.C
	}
	var due <-chan time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
			if due == nil {
				due = time.After(s.cfg.SyncDelay)
			}
		case <-due:
			due = nil
			s.runDue()
		case <-s.recheck:
			s.checkJoins(false)
		case <-s.lateKick:
			s.useLate()
		case <-periodic:
			r := s.host.Roster()
			for _, p := range s.channels.All() {
				if p.AllowHistory && p.CanRead(r, s.self) {
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
func (s *syncer) checkJoins(initial bool) {
	r := s.host.Roster()
	for _, p := range s.channels.All() {
		now := channelReadState{readable: p.CanRead(r, s.self), sub: s.subs.Get(p.ID)}
		old, seen := s.known[p.ID]
		s.known[p.ID] = now
		if initial || !now.readable || !p.AllowHistory {
			continue
		}
		switch {
		case !seen || !old.readable:
			s.log.Debug("history sync: channel joined", "channel", p.Name)
			s.markDue(p.ID, true)
		case old.sub == channel.Unsubscribed && now.sub != channel.Unsubscribed:
			s.markDue(p.ID, false)
		}
	}
}

// runDue runs a round for every due channel.
func (s *syncer) runDue() {
	s.mu.Lock()
	var chans []uuid.UUID
	full := maps.Clone(s.due)
	for ch := range s.due {
		chans = append(chans, ch)
	}
	clear(s.due)
	s.mu.Unlock()
	slices.SortFunc(chans, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for _, ch := range chans {
		if !s.running() {
			return
		}
		s.syncChannel(ch, full[ch])
	}
}

// syncCandidate is a linked reader we may ask for a channel's history.
type syncCandidate struct {
	pl      *peers.Link
	archive bool
	admin   bool      // an admin of the roster
	active  time.Time // last time we stored an envelope of theirs in the channel
	linked  time.Time // when its link was established
	key     proto.PubKey
}

// candidates returns the linked readers of p in the order to ask them
// (see orderCandidates).
func (s *syncer) candidates(p *channel.Policy, r *roster.Roster) []syncCandidate {
	active := map[proto.PubKey]time.Time{}
	if streams, err := s.store.Gaps(proto.ToChannel(p.ID)); err == nil {
		for _, st := range streams {
			if st.Updated.After(active[st.Sender]) {
				active[st.Sender] = st.Updated
			}
		}
	}
	var out []syncCandidate
	for _, pl := range s.host.linkList() {
		m, ok := r.Member(pl.Key)
		if !ok || !p.CanRead(r, pl.Key) {
			continue
		}
		out = append(out, syncCandidate{pl: pl, archive: m.Archive, admin: m.Role == roster.RoleAdmin,
			active: active[pl.Key], linked: pl.Conn.Established(), key: pl.Key})
	}
	orderCandidates(out)
	return out
}

// orderCandidates sorts the candidates of a round as PROTOCOL.md §17.2
// says: the peers that wrote to the channel most recently first (they
// were online and reading it lately), latest first; then, as the
// fallback, archive peers, then admins; then the longest-linked; then by
// key.
func orderCandidates(cs []syncCandidate) {
	tier := func(c syncCandidate) int {
		switch {
		case !c.active.IsZero():
			return 0
		case c.archive:
			return 1
		case c.admin:
			return 2
		}
		return 3
	}
	slices.SortFunc(cs, func(a, b syncCandidate) int {
		if ta, tb := tier(a), tier(b); ta != tb {
			return ta - tb
		}
		if !a.active.Equal(b.active) {
			return b.active.Compare(a.active)
		}
		if c := a.linked.Compare(b.linked); c != 0 {
			return c
		}
		return bytes.Compare(a.key[:], b.key[:])
	})
}

// isArchive reports whether r marks k as an archive.
func isArchive(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(k)
	return ok && m.Archive
}

// giveUpGaps gives up the holes no peer can fill, after a round in which
// every candidate served every page: the holes of a stream are given up
// only if its sender itself was among them (it answered without the
// missing numbers: a crash skipped reserved numbers, say), or it is us,
// or it can no longer read the channel. The holes of a sender not linked
// now are kept: it may hold them, and its link coming up makes a round
// due. It reports whether any hole was given up.
func (s *syncer) giveUpGaps(p *channel.Policy, r *roster.Roster, round syncRound) bool {
	served := map[proto.PubKey]bool{s.self: true}
	for _, pr := range round.Peers {
		served[pr.Peer] = true
	}
	give := func(sender proto.PubKey) bool {
		_, member := r.Member(sender)
		return served[sender] || !member || !p.CanRead(r, sender)
	}
	n, err := s.store.ForgetGaps(proto.ToChannel(p.ID), give)
	if err != nil {
		s.log.Error("history sync: give up gaps", "channel", p.Name, "err", err)
		return false
	}
	if n < round.Gaps {
		s.log.Info("history sync: gaps kept until their sender links", "channel", p.Name, "streams", round.Gaps-n)
	}
	if n == 0 {
		return false
	}
	s.metrics.inc(cSyncGapsForgotten)
	s.log.Info("history sync: gaps no peer can fill given up", "channel", p.Name, "streams", n)
	return true
}

// syncChannel runs one catch-up round for channel ch: a full one, or one
// that only resumes paging with the peers it stopped with.
func (s *syncer) syncChannel(ch uuid.UUID, full bool) {
	cfg := s.cfg
	p, ok := s.channels.ByID(ch)
	if !ok {
		return
	}
	r := s.host.Roster()
	if !p.AllowHistory || !p.CanRead(r, s.self) {
		return
	}
	peers := s.candidates(p, r)
	if !full {
		peers = s.withCursor(ch, peers)
	}
	if len(peers) == 0 {
		return
	}
	s.mu.Lock()
	join := s.joins[ch]
	s.mu.Unlock()
	round := syncRound{Channel: ch, Join: join, Started: time.Now()}
	s.metrics.inc(cSyncRounds)
	age, _ := cfg.retention(p, isArchive(r, s.self))
	since := time.Now().Add(-age).UnixMilli()
	var last *proto.SignedEnvelope // the last envelope handed to the commit stage
	answered, allComplete := 0, true
	for _, c := range peers {
		if !s.running() {
			return
		}
		if answered >= cfg.SyncPeers {
			s.awaitStored(last)
			if s.gapStreams(ch) == 0 {
				break
			}
		}
		req, resumed := s.takeCursor(ch, c.pl.Key)
		if req == nil {
			req = &proto.HistoryRequest{
				ChannelID:   ch,
				SinceTS:     since,
				MaxMessages: uint32(cfg.SyncPageMessages),
				MaxBytes:    uint32(cfg.SyncPageBytes),
			}
			if !join {
				s.awaitStored(last)
				marks, err := s.store.SeqMarks(ch)
				if err != nil {
					s.log.Error("history sync: read marks", "channel", p.Name, "err", err)
					return
				}
				req.SinceSeqBySender = marks
			}
		}
		res, got := s.pageFrom(c.pl, req)
		if got != nil {
			last = got
		}
		if resumed && full && !join && res.complete() {
			// The cursor's marks may have passed holes this peer holds
			// now (a restarted peer, an envelope it got since): a full
			// round asks again from the stored marks.
			if more, got := s.holesFrom(ch, c.pl, since, last); more != nil {
				res = res.then(*more)
				if got != nil {
					last = got
				}
			}
		}
		res.Archive, res.Resumed = c.archive, resumed
		round.Peers = append(round.Peers, res)
		if !res.complete() {
			allComplete = false
		}
		if !res.ok() {
			s.log.Info("history sync: peer did not serve", "channel", p.Name, "peer", c.pl.Key.Fingerprint(),
				"status", res.Status.String(), "err", res.Err)
			continue
		}
		answered++
		if join && res.complete() {
			join = false
			s.mu.Lock()
			delete(s.joins, ch)
			s.mu.Unlock()
			s.endBackfill()
		}
	}
	s.awaitStored(last)
	round.Gaps = s.gapStreams(ch)
	if round.Gaps > 0 && full && allComplete && len(round.Peers) == len(peers) {
		round.ForgotGaps = s.giveUpGaps(p, r, round)
	}
	for _, pr := range round.Peers {
		if pr.LinkLost {
			// The link closed under the round (the peer moved it to its
			// Unix socket, say, or restarted): what it had yet to page,
			// at the end of its stream, leaves no hole to see. Run the
			// round again; a peer linked anew is among its candidates.
			s.markDue(ch, false)
			break
		}
		if pr.Paused {
			// Resume at once rather than after SyncInterval.
			s.markResume(ch)
			break
		}
	}
	round.Ended = time.Now()
	delivered := 0
	for _, pr := range round.Peers {
		delivered += pr.Delivered
	}
	s.log.Debug("history sync round", "channel", p.Name, "peers", len(round.Peers), "delivered", delivered,
		"gaps", round.Gaps, "took", round.Ended.Sub(round.Started))
	s.host.roundDone(round)
}

// holesFrom asks pl for the channel's envelopes above the stored marks
// once resumed paging with it is done, if holes remain: nil when none do
// (or the marks cannot be read).
func (s *syncer) holesFrom(ch uuid.UUID, pl *peers.Link, since int64, last *proto.SignedEnvelope) (*syncPeerResult, *proto.SignedEnvelope) {
	s.awaitStored(last)
	if s.gapStreams(ch) == 0 {
		return nil, nil
	}
	marks, err := s.store.SeqMarks(ch)
	if err != nil {
		return nil, nil
	}
	s.log.Debug("history sync: resumed paging done with holes left; asking the peer from our marks", "peer", pl.Key.Fingerprint())
	res, got := s.pageFrom(pl, &proto.HistoryRequest{ChannelID: ch, SinceTS: since, SinceSeqBySender: marks,
		MaxMessages: uint32(s.cfg.SyncPageMessages), MaxBytes: uint32(s.cfg.SyncPageBytes)})
	return &res, got
}

// then is r followed by more paging with the same peer in the same round.
func (r syncPeerResult) then(more syncPeerResult) syncPeerResult {
	r.Status, r.Err, r.Paused = more.Status, more.Err, more.Paused
	r.Pages += more.Pages
	r.Envelopes += more.Envelopes
	r.Delivered += more.Delivered
	return r
}

// awaitStored waits, up to storedWait, until the commit stage has stored
// se (and so, as it commits in arrival order, everything handed to it
// before se).
func (s *syncer) awaitStored(se *proto.SignedEnvelope) {
	if se == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, storedWait)
	defer cancel()
	s.host.awaitStored(ctx, se)
}

// gapStreams counts the channel's streams with holes.
func (s *syncer) gapStreams(ch uuid.UUID) int {
	streams, err := s.store.Gaps(proto.ToChannel(ch))
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
