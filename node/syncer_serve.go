package node

import (
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The history server's counters.
var (
	famHistServed    = newFamily("meshd_history_requests_served_total", "History requests from peers served.")
	famHistServedEnv = newFamily("meshd_history_served_envelopes_total", "Envelopes sent in history responses.")
	famHistFailed    = newFamily("meshd_history_serve_failures_total", "History requests from peers that failed.")
	famHistPaced     = newFamily("meshd_history_serve_paced_total", "History requests from peers held back by pacing.")
	famHistRefused   = newFamily("meshd_history_requests_refused_total", "History requests from peers refused, by status.", "status")

	cHistServed          = newCounter("history.served", famHistServed)
	cHistServedEnvelopes = newCounter("history.served.envelopes", famHistServedEnv)
	cHistFailed          = newCounter("history.serve_failed", famHistFailed)
	cHistPaced           = newCounter("history.serve_paced", famHistPaced)
	// cHistRefused counts "history.refused.<status>".
	cHistRefused = newStatusVec("history.refused.", famHistRefused)
)

// statusVec counts "<prefix><status>" by the status of a refusal.
type statusVec struct {
	prefix string
	c      [proto.HistoryUnknownChannel + 1]counter
}

func newStatusVec(prefix string, f *Family) statusVec {
	v := statusVec{prefix: prefix}
	for st := range v.c {
		v.c[st] = -1
		if st > int(proto.HistoryOK) { // ok is no refusal
			name := statusMetric(proto.HistoryStatus(st))
			v.c[st] = newCounter(prefix+name, f, name)
		}
	}
	return v
}

// count adds one to the counter of st. A status parsing refuses never
// comes here; it would be counted by name, "<prefix>status_<n>".
func (v statusVec) count(m *Metrics, st proto.HistoryStatus) {
	if int(st) < len(v.c) && v.c[st] >= 0 {
		m.inc(v.c[st])
		return
	}
	m.Inc(v.prefix + statusMetric(st))
}

// The serving side of the [syncer]: answering peers' HistoryRequests.

// takeRequest admits a HistoryRequest for serving: it drops replays and
// requests beyond the peer's concurrency, takes a page from the peer's
// token bucket (going into debt when it is empty: the debt is the wait
// before the page is served) and starts the goroutine that serves it.
func (s *syncer) takeRequest(se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	pl := s.host.linkTo(se.From)
	if pl == nil {
		s.host.drop(dropHistoryNoLink, se, src, nil)
		return false
	}
	s.mu.Lock()
	if _, dup := s.served.get(refOf(se)); dup {
		s.mu.Unlock()
		s.host.drop(dropDuplicate, se, src, nil)
		return false
	}
	b := s.serving[se.From]
	if b == nil {
		b = &serveBudget{pages: rate.NewLimiter(rate.Limit(s.cfg.HistoryServeRate), s.cfg.HistoryServeBurst)}
		s.serving[se.From] = b
	}
	if b.inflight >= s.cfg.HistoryServeConcurrency {
		s.mu.Unlock()
		s.host.drop(dropHistoryBusy, se, src, nil)
		return false
	}
	s.served.put(refOf(se), struct{}{})
	wait := b.pages.ReserveN(now, 1).DelayFrom(now)
	if wait > 0 {
		s.metrics.inc(cHistPaced)
	}
	b.inflight++
	// Checked under mu, with which close cannot interleave its Wait: a
	// serving goroutine is either added before close cancels, or not at all.
	if !s.running() {
		b.inflight--
		s.mu.Unlock()
		s.host.drop(dropShutdown, se, src, nil)
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serve(pl, se, wait)
	return true
}

func (s *syncer) releaseServe(k proto.PubKey) {
	s.mu.Lock()
	if b := s.serving[k]; b != nil {
		b.inflight--
	}
	s.mu.Unlock()
}

// serve answers one HistoryRequest after wait.
func (s *syncer) serve(pl *peers.Link, se *proto.SignedEnvelope, wait time.Duration) {
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
	out, err := s.host.sign(proto.ToPeer(se.From), proto.KindHistoryResponse, s.cfg.EnvelopeTTL, func(e *proto.Envelope) {
		e.HistoryResponse = resp
	})
	if err != nil {
		s.metrics.inc(cHistFailed)
		s.log.Error("sign history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	if err := s.send(pl, out); err != nil {
		s.metrics.inc(cHistFailed)
		s.log.Warn("send history response", "peer", se.From.Fingerprint(), "err", err)
		return
	}
	s.metrics.inc(cHistServed)
	s.metrics.add(cHistServedEnvelopes, uint64(len(resp.Messages)))
}

// answer builds the answer to a HistoryRequest; nil when the store failed
// (the requester then times out and asks another peer).
func (s *syncer) answer(se *proto.SignedEnvelope) *proto.HistoryResponse {
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
			s.metrics.inc(cHistFailed)
			s.log.Error("read history", "channel", req.ChannelID, "peer", se.From.Fingerprint(), "err", err)
			return nil
		}
		resp.Status, resp.Messages, resp.More = proto.HistoryOK, msgs, more
		return resp
	}
	cHistRefused.count(s.metrics, resp.Status)
	s.log.Debug("history request refused", "peer", se.From.Fingerprint(), "channel", req.ChannelID, "status", resp.Status.String())
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
