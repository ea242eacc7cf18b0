package syncer

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Paging with one peer, for the [Syncer].
//
// Paging never starts again from the window's start to get past a page it
// already had: where it stops before the last page (MaxRoundPages pages
// in one round, a timeout, a closed link), the request it would send next
// is kept as a cursor for (channel, peer), and the next round with that
// peer sends it instead of a fresh request. An answer that comes after
// SyncTimeout, while its request is unexpired, is still used: its page
// goes through the pipeline, and its `more` moves the cursor on.

const (
	// maxCursors bounds the kept cursors; the oldest goes first.
	maxCursors = 1024
	// cursorAge is how long a cursor is resumed; an older one is
	// dropped and the round starts afresh from the marks.
	cursorAge = 30 * time.Minute
	// maxLate bounds the late answers waiting for the sync loop, and the
	// timed-out requests kept outstanding for them.
	maxLate = 64
)

// cursorKey names where paging with one peer in one channel stopped.
type cursorKey struct {
	channel uuid.UUID
	peer    proto.PubKey
}

// cursor is the request paging would have sent next.
type cursor struct {
	req   *proto.HistoryRequest
	saved time.Time
}

// lateAnswer is an answer that came after its wait timed out.
type lateAnswer struct {
	o  *outstanding
	se *proto.SignedEnvelope
}

// pageFrom asks pl for req and the pages after it until one comes
// without `more`, or paging pauses at MaxRoundPages. It returns what the
// peer gave and the last page it handed to the commit stage.
func (s *Syncer) pageFrom(pl *peers.Link, req *proto.HistoryRequest) (res PeerResult, last *Batch) {
	res.Peer = pl.Key
	src := Source{Link: pl, History: true}
	o, err := s.request(pl, req)
	if err != nil {
		res.Err = err.Error()
		res.LinkLost = isClosed(pl)
		s.saveCursor(pl.Key, req)
		return res, nil
	}
	for o != nil {
		se, err := s.awaitAnswer(o, pl)
		if err != nil {
			res.Err = err.Error()
			res.LinkLost = errors.Is(err, errSyncLinkClosed)
			s.saveCursor(pl.Key, req)
			return res, last
		}
		page, st, err := s.checkPage(o, se)
		res.Status = st
		if err != nil {
			res.Err = err.Error()
			return res, last
		}
		if st != proto.HistoryOK {
			return res, last
		}
		res.Pages++
		// Ask for the next page before checking this one, so the peer
		// reads it while we verify.
		o = nil
		moved := true
		if se.HistoryResponse.More {
			moved = advances(req, page)
			if next := history.NextHistoryRequest(req, page); next != nil && moved {
				req = next
				if res.Pages >= MaxRoundPages {
					res.Paused = true
					s.count(Paused, 1)
					s.saveCursor(pl.Key, req)
				} else if o, err = s.request(pl, req); err != nil {
					res.Err = err.Error()
					s.saveCursor(pl.Key, req)
				}
			}
		}
		fresh, got := s.deliver(page, req.ChannelID, src)
		if got != nil {
			last = got
		}
		res.Envelopes += len(page)
		res.Delivered += fresh
		if !moved {
			// An honest peer's page always holds something the request
			// asked for (§6.5), so paging moves on with every page. This
			// one repeated what we had excluded: paging with it ends, as
			// a failure, so no gap is given up on its word.
			s.count(Stalled, 1)
			res.Err = "a page with more held nothing the request asked for"
		}
	}
	if res.complete() {
		s.dropCursor(req.ChannelID, pl.Key)
	}
	return res, last
}

// checkPage checks an admitted answer to o: its status, and that it holds
// no more than asked for; it parses its envelopes (dropping those that do
// not parse). The error tells why the whole answer is refused.
func (s *Syncer) checkPage(o *outstanding, se *proto.SignedEnvelope) ([]*proto.SignedEnvelope, proto.HistoryStatus, error) {
	h := se.HistoryResponse
	if h.Status != proto.HistoryOK {
		s.host.CountRefused(false, h.Status)
		return nil, h.Status, nil
	}
	size := 0
	for _, m := range h.Messages {
		size += len(m)
	}
	if len(h.Messages) > o.maxMsgs || size > o.maxSize {
		err := fmt.Errorf("%d messages, %d bytes; asked for at most %d, %d bytes", len(h.Messages), size, o.maxMsgs, o.maxSize)
		s.drop(DropHistoryOverLimit, se, Source{Link: o.pl}, err)
		return nil, h.Status, errors.New("answer over the requested limits")
	}
	s.count(Pages, 1)
	page := make([]*proto.SignedEnvelope, 0, len(h.Messages))
	for _, raw := range h.Messages {
		m, err := proto.ParseEnvelope(raw)
		if err != nil {
			s.drop(DropMalformed, nil, Source{Link: o.pl, History: true}, err)
			continue
		}
		page = append(page, m)
	}
	return page, h.Status, nil
}

// deliver hands the channel Messages of page to the receive pipeline as
// history and drops anything else. It returns how many were new and the
// batch handed to the pipeline (nil when none was).
func (s *Syncer) deliver(page []*proto.SignedEnvelope, ch uuid.UUID, src Source) (fresh int, b *Batch) {
	dest := proto.ToChannel(ch)
	envs := make([]*proto.SignedEnvelope, 0, len(page))
	for _, m := range page {
		if m.Kind != proto.KindMessage || m.To != dest {
			s.drop(DropHistoryForeign, m, src, nil)
			continue
		}
		envs = append(envs, m)
	}
	s.count(Envelopes, uint64(len(page)))
	return s.hand(envs, src)
}

// advances reports whether page holds an envelope that req asked for: one
// above its stream's mark, or of an unmarked stream at or after since_ts.
// The request for the next page then excludes it, so paging on such
// pages ends however many envelopes the peer holds.
func advances(req *proto.HistoryRequest, page []*proto.SignedEnvelope) bool {
	marks := make(map[proto.SeqMark]uint64, len(req.SinceSeqBySender))
	for _, m := range req.SinceSeqBySender {
		marks[proto.SeqMark{Sender: m.Sender, Epoch: m.Epoch}] = m.LastSeq
	}
	for _, se := range page {
		if mark, ok := marks[proto.SeqMark{Sender: se.From, Epoch: se.Epoch}]; ok {
			if se.Seq > mark {
				return true
			}
		} else if se.TS >= req.SinceTS {
			return true
		}
	}
	return false
}

// request signs req to pl's peer, records it as outstanding and sends it.
func (s *Syncer) request(pl *peers.Link, req *proto.HistoryRequest) (*outstanding, error) {
	se, err := s.host.Sign(proto.ToPeer(pl.Key), proto.KindHistoryRequest, s.cfg.EnvelopeTTL, func(e *proto.Envelope) {
		e.HistoryRequest = req
	})
	if err != nil {
		return nil, fmt.Errorf("sign history request: %w", err)
	}
	o := &outstanding{
		id: se.ID, peer: pl.Key, pl: pl, channel: req.ChannelID, req: req,
		maxMsgs: int(req.MaxMessages), maxSize: int(req.MaxBytes),
		answer:  make(chan *proto.SignedEnvelope, 1),
		expires: se.Expires(),
	}
	s.mu.Lock()
	s.sweepLateLocked(time.Now())
	s.pending[o.id] = o
	s.mu.Unlock()
	if err := s.send(pl, se); err != nil {
		s.forget(o)
		return nil, fmt.Errorf("send history request: %w", err)
	}
	s.count(Requests, 1)
	return o, nil
}

// awaitAnswer waits for the answer to o. When the wait times out, o stays
// outstanding as late (its answer is used when it comes); otherwise it is
// no longer outstanding afterwards.
func (s *Syncer) awaitAnswer(o *outstanding, pl *peers.Link) (*proto.SignedEnvelope, error) {
	t := time.NewTimer(s.cfg.SyncTimeout)
	defer t.Stop()
	select {
	case se := <-o.answer:
		return se, nil
	case <-t.C:
		s.count(Timeouts, 1)
		s.mu.Lock()
		o.late = true
		s.mu.Unlock()
		// An answer may have come between the timer and the lock.
		select {
		case se := <-o.answer:
			return se, nil
		default:
		}
		return nil, fmt.Errorf("no answer within %v", s.cfg.SyncTimeout)
	case <-pl.Conn.Done():
		s.forget(o)
		return nil, errSyncLinkClosed
	case <-s.ctx.Done():
		s.forget(o)
		return nil, s.ctx.Err()
	}
}

// errSyncLinkClosed ends a page whose link closed before the answer came.
var errSyncLinkClosed = errors.New("link closed")

// isClosed reports whether pl's link has closed.
func isClosed(pl *peers.Link) bool {
	select {
	case <-pl.Conn.Done():
		return true
	default:
		return pl.Conn.Err() != nil
	}
}

func (s *Syncer) forget(o *outstanding) {
	s.mu.Lock()
	delete(s.pending, o.id)
	s.mu.Unlock()
}

// sweepLateLocked forgets late requests that expired, and the oldest
// beyond maxLate.
func (s *Syncer) sweepLateLocked(now time.Time) {
	var late []*outstanding
	for id, o := range s.pending {
		switch {
		case !o.late:
		case !now.Before(o.expires):
			delete(s.pending, id)
		default:
			late = append(late, o)
		}
	}
	for len(late) > maxLate {
		oldest := 0
		for i, o := range late {
			if o.expires.Before(late[oldest].expires) {
				oldest = i
			}
		}
		delete(s.pending, late[oldest].id)
		late = append(late[:oldest], late[oldest+1:]...)
	}
}

// queueLate hands a late answer to the sync loop. handle runs on the
// receive path, which must not wait for the pipeline it feeds.
func (s *Syncer) queueLate(o *outstanding, se *proto.SignedEnvelope) {
	s.mu.Lock()
	if len(s.late) >= maxLate {
		s.mu.Unlock()
		s.drop(DropHistoryUnsolicited, se, Source{Link: o.pl}, errors.New("too many late answers waiting"))
		return
	}
	s.late = append(s.late, lateAnswer{o: o, se: se})
	s.mu.Unlock()
	select {
	case s.lateKick <- struct{}{}:
	default:
	}
}

// useLate uses the late answers waiting: their envelopes go through the
// pipeline, and where the page says more and paging with that peer
// stopped at its request, the cursor moves past it and the channel is due
// for a round that resumes paging with that peer alone.
func (s *Syncer) useLate() {
	s.mu.Lock()
	late := s.late
	s.late = nil
	s.mu.Unlock()
	for _, l := range late {
		page, st, err := s.checkPage(l.o, l.se)
		if err != nil || st != proto.HistoryOK {
			continue
		}
		s.count(LatePages, 1)
		fresh, _ := s.deliver(page, l.o.channel, Source{Link: l.o.pl, History: true})
		s.log.Info("history sync: late page used", "peer", l.o.peer.Fingerprint(), "envelopes", len(page), "new", fresh)
		var next *proto.HistoryRequest
		if l.se.HistoryResponse.More && advances(l.o.req, page) {
			next = history.NextHistoryRequest(l.o.req, page)
		}
		s.mu.Lock()
		k := cursorKey{l.o.channel, l.o.peer}
		resume := false
		if c := s.cursors[k]; c != nil && c.req == l.o.req {
			// Paging stopped at this request: it resumes after the page.
			if next != nil {
				s.cursors[k] = &cursor{req: next, saved: time.Now()}
				resume = true
			} else {
				delete(s.cursors, k)
			}
		}
		s.mu.Unlock()
		if resume {
			s.markResume(l.o.channel)
		}
	}
}

// saveCursor keeps req as where paging with peer stopped.
func (s *Syncer) saveCursor(peer proto.PubKey, req *proto.HistoryRequest) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursors[cursorKey{req.ChannelID, peer}] = &cursor{req: req, saved: now}
	for len(s.cursors) > maxCursors {
		var oldest cursorKey
		var at time.Time
		for k, c := range s.cursors {
			if at.IsZero() || c.saved.Before(at) {
				oldest, at = k, c.saved
			}
		}
		delete(s.cursors, oldest)
	}
}

// takeCursor returns the request to resume paging with peer in ch from,
// if paging stopped there less than cursorAge ago.
func (s *Syncer) takeCursor(ch uuid.UUID, peer proto.PubKey) (*proto.HistoryRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := cursorKey{ch, peer}
	c := s.cursors[k]
	delete(s.cursors, k)
	if c == nil || time.Since(c.saved) > cursorAge {
		return nil, false
	}
	s.count(Resumed, 1)
	return c.req, true
}

// withCursor returns the candidates paging stopped with in ch.
func (s *Syncer) withCursor(ch uuid.UUID, peers []syncCandidate) []syncCandidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []syncCandidate
	for _, c := range peers {
		if s.cursors[cursorKey{ch, c.pl.Key}] != nil {
			out = append(out, c)
		}
	}
	return out
}

func (s *Syncer) dropCursor(ch uuid.UUID, peer proto.PubKey) {
	s.mu.Lock()
	delete(s.cursors, cursorKey{ch, peer})
	s.mu.Unlock()
}
