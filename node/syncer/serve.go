package syncer

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The serving side of the [Syncer]: answering peers' HistoryRequests.

// takeRequest admits a HistoryRequest for serving: it drops replays and
// requests beyond the peer's concurrency, takes a page from the peer's
// token bucket (going into debt when it is empty: the debt is the wait
// before the page is served) and starts the goroutine that serves it.
func (s *Syncer) takeRequest(se *proto.SignedEnvelope, src Source, now time.Time) bool {
	pl := s.host.LinkTo(se.From)
	if pl == nil {
		s.drop(DropHistoryNoLink, se, src, nil)
		return false
	}
	s.mu.Lock()
	if _, dup := s.served.Get(refOf(se)); dup {
		s.mu.Unlock()
		s.drop(DropDuplicate, se, src, nil)
		return false
	}
	b := s.serving[se.From]
	if b == nil {
		b = &serveBudget{pages: rate.NewLimiter(rate.Limit(s.cfg.HistoryServeRate), s.cfg.HistoryServeBurst)}
		s.serving[se.From] = b
	}
	if b.inflight >= s.cfg.HistoryServeConcurrency {
		s.mu.Unlock()
		s.drop(DropHistoryBusy, se, src, nil)
		return false
	}
	s.served.Put(refOf(se), struct{}{})
	wait := b.pages.ReserveN(now, 1).DelayFrom(now)
	if wait > 0 {
		s.count(ServePaced, 1)
	}
	b.inflight++
	// Checked under mu, with which close cannot interleave its Wait: a
	// serving goroutine is either added before close cancels, or not at all.
	if !s.running() {
		b.inflight--
		s.mu.Unlock()
		s.drop(DropShutdown, se, src, nil)
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serve(pl, se, wait)
	return true
}

func (s *Syncer) releaseServe(k proto.PubKey) {
	s.mu.Lock()
	if b := s.serving[k]; b != nil {
		b.inflight--
	}
	s.mu.Unlock()
}

// serve answers one HistoryRequest after wait.
func (s *Syncer) serve(pl *peers.Link, se *proto.SignedEnvelope, wait time.Duration) {
	defer s.wg.Done()
	defer s.releaseServe(se.From)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		case <-pl.Conn.Done():
			return
		}
	}
	if !s.serveRoom(pl, se) {
		return
	}
	resp := s.answer(se)
	if resp == nil {
		return
	}
	out, err := s.host.Sign(proto.ToPeer(se.From), proto.KindHistoryResponse, s.cfg.EnvelopeTTL, func(e *proto.Envelope) {
		e.HistoryResponse = resp
	})
	if err != nil {
		s.count(ServeFailed, 1)
		s.log.Error("sign history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	if err := s.send(pl, out); err != nil {
		s.count(ServeFailed, 1)
		s.log.Warn("send history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	s.count(ServeServed, 1)
	s.count(ServedEnvelopes, uint64(len(resp.Messages)))
}

// answer builds the answer to a HistoryRequest; nil when the store failed
// (the requester then times out and asks another peer).
func (s *Syncer) answer(se *proto.SignedEnvelope) *proto.HistoryResponse {
	req := se.HistoryRequest
	resp := &proto.HistoryResponse{ChannelID: req.ChannelID, InReplyTo: se.ID}
	p, ok := s.channels.ByID(req.ChannelID)
	switch {
	case !ok:
		resp.Status = proto.HistoryUnknownChannel
	case !p.AllowHistory:
		resp.Status = proto.HistoryDisabled
	case !p.CanRead(s.host.Roster(), se.From):
		resp.Status = proto.HistoryDenied
	default:
		msgs, more, err := s.store.History(req)
		if err != nil {
			s.count(ServeFailed, 1)
			s.log.Error("read history", "channel", req.ChannelID, "peer", se.From.Fingerprint(), "err", err)
			return nil
		}
		resp.Status, resp.Messages, resp.More = proto.HistoryOK, msgs, more
		return resp
	}
	s.host.CountRefused(true, resp.Status)
	s.log.Debug("history request refused", "peer", se.From.Fingerprint(), "channel", req.ChannelID, "status", resp.Status.String())
	return resp
}
