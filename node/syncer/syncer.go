package syncer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/fifo"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

const (
	// storedWait bounds the wait for the commit stage before marks are
	// read for the next peer.
	storedWait = 5 * time.Second
	// MaxRoundPages pauses paging with a peer after this many pages in
	// one round: the round moves on, and the next round, made due at
	// once, resumes where paging paused (see page.go).
	MaxRoundPages = 200
	// servedMemory is how many served request ids are remembered to drop
	// replays (an envelope is live for its ttl, 300 s by default).
	servedMemory = 4096
	// sendWait bounds how long a history envelope waits for room in a
	// full link send queue.
	sendWait = time.Second
)

// Syncer runs history sync and serves peers' HistoryRequests. It owns its
// goroutines: [Syncer.Start] starts them and [Syncer.Close] stops them
// and waits.
type Syncer struct {
	host     Host
	cfg      Config // read-only
	self     proto.PubKey
	store    *history.Store
	channels *channel.Set
	subs     *channel.Subscriptions
	log      *slog.Logger
	// roundDone observes every finished catch-up round (Params.RoundDone).
	roundDone func(Round)

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the sync loop and every serving goroutine
	closeOnce sync.Once

	kick     chan struct{} // wakes the sync loop when a channel became due
	recheck  chan struct{} // wakes the sync loop to look for joined channels
	lateKick chan struct{} // wakes the sync loop to use late answers
	batches  chan *Batch   // pages for the node's receive pipeline

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
	served   *fifo.Map[ref, struct{}]      // requests (from, id) served recently
	cursors  map[cursorKey]*cursor         // where paging with a peer stopped, to resume
	late     []lateAnswer                  // late answers for the sync loop to use
	// refused: senders whose envelopes in a channel's pages this round
	// were refused by a quota of the node (Batch.Refused).
	refused map[uuid.UUID]map[proto.PubKey]bool
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

// New returns a syncer; ctx bounds its life. It records which channels
// the node reads now, before any link exists (see checkJoins): a policy
// that arrives over a link later, however early, is then a join.
func New(ctx context.Context, p Params) *Syncer {
	s := &Syncer{
		host:      p.Host,
		cfg:       p.Config,
		self:      p.Self,
		store:     p.Store,
		channels:  p.Channels,
		subs:      p.Subs,
		log:       p.Log,
		roundDone: p.RoundDone,
		kick:      make(chan struct{}, 1),
		recheck:   make(chan struct{}, 1),
		lateKick:  make(chan struct{}, 1),
		batches:   make(chan *Batch),
		cursors:   map[cursorKey]*cursor{},
		known:     map[uuid.UUID]channelReadState{},
		pending:   map[uuid.UUID]*outstanding{},
		due:       map[uuid.UUID]bool{},
		joins:     map[uuid.UUID]bool{},
		serving:   map[proto.PubKey]*serveBudget{},
		served:    fifo.New[ref, struct{}](servedMemory),
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.checkJoins(true)
	s.loadBackfill()
	return s
}

// loadBackfill treats every channel we read as joined when the store asks
// for a backfill (meshctl repair rebuilt it): each one's first round asks
// without marks too. The store's flag is cleared once no join is left.
func (s *Syncer) loadBackfill() {
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
func (s *Syncer) endBackfill() {
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

// Start starts the sync loop.
func (s *Syncer) Start() {
	s.wg.Add(1)
	go s.loop()
}

// Close stops the sync loop and every serving goroutine, and waits for
// them. It is idempotent.
func (s *Syncer) Close() {
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
func (s *Syncer) running() bool { return s.ctx.Err() == nil }

// ---- admission ----

// Authorize applies the rules for HistoryRequest and HistoryResponse
// envelopes; it returns a drop reason or dropNone. The caller has checked that
// the envelope is addressed to us and that its sender is a roster member,
// which is all a request needs.
func (s *Syncer) Authorize(se *proto.SignedEnvelope) Drop {
	if se.Kind != proto.KindHistoryResponse {
		return DropNone
	}
	if !s.running() {
		return DropShutdown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.matchLocked(se) == nil {
		return DropHistoryUnsolicited
	}
	return DropNone
}

// matchLocked returns the outstanding request se answers, if se comes
// from the peer asked and names the channel asked about, and the request
// has not expired.
func (s *Syncer) matchLocked(se *proto.SignedEnvelope) *outstanding {
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

// Handle serves an admitted HistoryRequest or takes a HistoryResponse;
// it reports whether the envelope was used.
func (s *Syncer) Handle(se *proto.SignedEnvelope, src Source, now time.Time) bool {
	if !s.running() {
		s.drop(DropShutdown, se, src, nil)
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
		s.drop(DropHistoryUnsolicited, se, src, nil)
		return false
	}
	s.count(Responses, 1)
	if o.late {
		s.queueLate(o, se)
		return true
	}
	o.answer <- se // buffered, and o left pending above: the only send
	return true
}

// send hands se to pl, waiting up to sendWait for room in a full send
// queue: a history page is worth a short wait, unlike live fan-out.
func (s *Syncer) send(pl *peers.Link, se *proto.SignedEnvelope) error {
	ctx, cancel := context.WithTimeout(s.ctx, sendWait)
	defer cancel()
	return pl.Conn.SendWait(ctx, append([]byte{byte(proto.FrameEnvelope)}, se.Raw...))
}

// ---- requesting ----

// OnLinkUp makes a catch-up round due for every channel the new peer and
// we may both read.
func (s *Syncer) OnLinkUp(pl *peers.Link) {
	if !s.running() {
		return
	}
	r := s.host.Roster()
	for _, p := range s.channels.All() {
		if p.AllowHistory && p.CanRead(r, s.self) && p.CanRead(r, pl.Key) {
			s.MarkDue(p.ID, false)
		}
	}
}

// MarkDue makes a round due for channel ch; join marks it joined, so its
// next successful round backfills without marks.
func (s *Syncer) MarkDue(ch uuid.UUID, join bool) {
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
func (s *Syncer) markResume(ch uuid.UUID) {
	s.mu.Lock()
	if _, ok := s.due[ch]; !ok {
		s.due[ch] = false
	}
	s.mu.Unlock()
	s.wake()
}

func (s *Syncer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ChannelsChanged tells the sync loop that what we may read or follow may
// have changed: a policy was learnt, a subscription set, the roster
// updated. The loop then looks for channels we joined (checkJoins).
func (s *Syncer) ChannelsChanged() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}
