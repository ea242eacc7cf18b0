package syncer

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Catch-up rounds: the sync loop, the candidates of a round, and the
// round itself (see the package doc).

// Round records one catch-up round of a channel.
type Round struct {
	Channel    uuid.UUID
	Join       bool
	Started    time.Time
	Ended      time.Time
	Peers      []PeerResult // in the order asked
	Gaps       int          // streams with holes after the round
	ForgotGaps bool
}

// PeerResult is what one peer gave in a round.
type PeerResult struct {
	Peer      proto.PubKey
	Archive   bool
	Status    proto.HistoryStatus // 0 when it never answered
	Err       string
	Pages     int
	Envelopes int // envelopes received
	Delivered int // envelopes that passed the pipeline (new ones)
	// Paused: paging stopped at MaxRoundPages with more to come; the
	// next round resumes it.
	Paused  bool
	Resumed bool // paging started from where an earlier one stopped
	// LinkLost: the link closed under the paging (see syncChannel).
	LinkLost bool `json:"-"`
}

// ok reports whether the peer served without error.
func (r PeerResult) ok() bool { return r.Status == proto.HistoryOK && r.Err == "" }

// complete reports whether the peer served every page up to the last.
func (r PeerResult) complete() bool { return r.ok() && !r.Paused }

// loop collects triggers and runs catch-up rounds, one at a time.
func (s *Syncer) loop() {
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
					s.MarkDue(p.ID, false)
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
func (s *Syncer) checkJoins(initial bool) {
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
			s.MarkDue(p.ID, true)
		case old.sub == channel.Unsubscribed && now.sub != channel.Unsubscribed:
			s.MarkDue(p.ID, false)
		}
	}
}

// runDue runs a round for every due channel.
func (s *Syncer) runDue() {
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
func (s *Syncer) candidates(p *channel.Policy, r *roster.Roster) []syncCandidate {
	active := map[proto.PubKey]time.Time{}
	if streams, err := s.store.Gaps(proto.ToChannel(p.ID)); err == nil {
		for _, st := range streams {
			if st.Updated.After(active[st.Sender]) {
				active[st.Sender] = st.Updated
			}
		}
	}
	var out []syncCandidate
	for _, pl := range s.host.Links() {
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
func (s *Syncer) giveUpGaps(p *channel.Policy, r *roster.Roster, round Round) bool {
	served := map[proto.PubKey]bool{s.self: true}
	for _, pr := range round.Peers {
		served[pr.Peer] = true
	}
	refused := s.takeRefused(p.ID)
	give := func(sender proto.PubKey) bool {
		if refused[sender] {
			return false // we refused what was offered; a later round may take it
		}
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
	s.count(GapsForgotten, 1)
	s.log.Info("history sync: gaps no peer can fill given up", "channel", p.Name, "streams", n)
	return true
}

// noteRefused records that an envelope of sender in a page of channel ch
// was refused by a quota of the node.
func (s *Syncer) noteRefused(ch uuid.UUID, sender proto.PubKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[uuid.UUID]map[proto.PubKey]bool{}
	}
	m := s.refused[ch]
	if m == nil {
		m = map[proto.PubKey]bool{}
		s.refused[ch] = m
	}
	m[sender] = true
}

// takeRefused returns and forgets the senders refused in channel ch's
// pages since the last call.
func (s *Syncer) takeRefused(ch uuid.UUID) map[proto.PubKey]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.refused[ch]
	delete(s.refused, ch)
	return m
}

// syncChannel runs one catch-up round for channel ch: a full one, or one
// that only resumes paging with the peers it stopped with.
func (s *Syncer) syncChannel(ch uuid.UUID, full bool) {
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
	round := Round{Channel: ch, Join: join, Started: time.Now()}
	s.takeRefused(ch) // from earlier rounds' pages
	s.count(Rounds, 1)
	age := cfg.Retention(p, isArchive(r, s.self))
	since := time.Now().Add(-age).UnixMilli()
	var last *Batch // the last page handed to the commit stage
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
		if full && !join && res.complete() {
			// Paging may have passed holes this peer holds: a page cut
			// between a stream's numbers above a hole and the hole's own
			// envelope, stamped later, raises the mark past it
			// (history.NextHistoryRequest), and a cursor's marks may
			// predate what the peer holds now (it restarted, or got the
			// envelope since). A full round asks the peer once more for
			// the streams with holes alone.
			if more, got := s.holesFrom(ch, c.pl, last); more != nil {
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
			s.MarkDue(ch, false)
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
	if s.roundDone != nil {
		s.roundDone(round)
	}
}

// holesFrom asks pl, once its paging is done, for the envelopes above
// the stored marks of the channel's streams with holes, and of no other
// stream (since_ts at its greatest, so no unmarked stream matches): nil
// when no hole is left (or the store cannot be read). Without the other
// streams in the way, a hole's envelope comes in the same page as the
// few numbers above it.
func (s *Syncer) holesFrom(ch uuid.UUID, pl *peers.Link, last *Batch) (*PeerResult, *Batch) {
	s.awaitStored(last)
	holed := s.holedStreams(ch)
	if len(holed) == 0 {
		return nil, nil
	}
	all, err := s.store.SeqMarks(ch)
	if err != nil {
		return nil, nil
	}
	var marks []proto.SeqMark
	for _, m := range all {
		if holed[proto.SeqMark{Sender: m.Sender, Epoch: m.Epoch}] {
			marks = append(marks, m)
		}
	}
	if len(marks) == 0 {
		return nil, nil
	}
	s.log.Debug("history sync: paging done with holes left; asking the peer for those streams", "peer", pl.Key.Fingerprint(), "streams", len(marks))
	res, got := s.pageFrom(pl, &proto.HistoryRequest{ChannelID: ch, SinceTS: math.MaxInt64, SinceSeqBySender: marks,
		MaxMessages: uint32(s.cfg.SyncPageMessages), MaxBytes: uint32(s.cfg.SyncPageBytes)})
	return &res, got
}

// then is r followed by more paging with the same peer in the same round.
func (r PeerResult) then(more PeerResult) PeerResult {
	r.Status, r.Err, r.Paused = more.Status, more.Err, more.Paused
	r.Pages += more.Pages
	r.Envelopes += more.Envelopes
	r.Delivered += more.Delivered
	return r
}

// gapStreams counts the channel's streams with holes.
func (s *Syncer) gapStreams(ch uuid.UUID) int { return len(s.holedStreams(ch)) }

// holedStreams returns the channel's streams with holes: none when the
// store cannot be read.
func (s *Syncer) holedStreams(ch uuid.UUID) map[proto.SeqMark]bool {
	streams, err := s.store.Gaps(proto.ToChannel(ch))
	if err != nil {
		return nil
	}
	holed := make(map[proto.SeqMark]bool)
	for _, st := range streams {
		if len(st.Missing) > 0 {
			holed[proto.SeqMark{Sender: st.Sender, Epoch: st.Epoch}] = true
		}
	}
	return holed
}
