package node

import (
	"strconv"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// History sync runs in the syncer package, held by the receive side
// (node/rx); this file is the node's side of it: the metrics it counts
// and syncHost, what the syncer sees of the node.

// The catch-up rounds' counters.
var (
	famSyncRounds    = newFamily("meshd_sync_rounds_total", "History catch-up rounds.")
	famSyncResponses = newFamily("meshd_sync_responses_total", "History responses received.")
	famSyncGaps      = newFamily("meshd_sync_gaps_forgotten_total", "Catch-up rounds that gave up gaps no peer could fill.")

	cSyncRounds        = newCounter("sync.rounds", famSyncRounds)
	cSyncResponses     = newCounter("sync.responses", famSyncResponses)
	cSyncGapsForgotten = newCounter("sync.gaps_forgotten", famSyncGaps)
)

// Catch-up page counters.
var (
	famSyncEnvelopes = newFamily("meshd_sync_envelopes_received_total", "Envelopes received in history catch-up pages.")
	famSyncPages     = newFamily("meshd_sync_pages_total", "History catch-up pages received.")
	famSyncRequests  = newFamily("meshd_sync_requests_total", "History requests sent.")
	famSyncTimeouts  = newFamily("meshd_sync_timeouts_total", "History requests that timed out.")
	famSyncLate      = newFamily("meshd_sync_late_pages_total", "History pages that came after their wait timed out, and were used.")
	famSyncResumed   = newFamily("meshd_sync_resumed_total", "Catch-up paging resumed where it stopped with a peer.")
	famSyncPaused    = newFamily("meshd_sync_paused_total", "Catch-up paging paused at the page limit of a round, to resume in the next.")
	famSyncStalled   = newFamily("meshd_sync_stalled_total", "Catch-up pages with more that held nothing the request asked for.")
	famSyncRefused   = newFamily("meshd_sync_refused_total", "History requests of ours a peer refused, by status.", "status")

	cSyncEnvelopes = newCounter("sync.envelopes", famSyncEnvelopes)
	cSyncPages     = newCounter("sync.pages", famSyncPages)
	cSyncRequests  = newCounter("sync.requests", famSyncRequests)
	cSyncTimeouts  = newCounter("sync.timeouts", famSyncTimeouts)
	cSyncLatePages = newCounter("sync.late_pages", famSyncLate)
	cSyncResumed   = newCounter("sync.resumed", famSyncResumed)
	cSyncPaused    = newCounter("sync.paused", famSyncPaused)
	cSyncStalled   = newCounter("sync.stalled", famSyncStalled)
	// cSyncRefused counts "sync.refused.<status>".
	cSyncRefused = newStatusVec("sync.refused.", famSyncRefused)
)

var cHistNoRoom = newCounter("history.serve_no_room", newFamily("meshd_history_requests_no_room_total",
	"History requests from peers left unanswered because the peer's send queue stayed full."))

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

// syncCounters maps each counter of the syncer to its metric.
var syncCounters = [syncer.NumCounters]counter{
	syncer.Rounds:          cSyncRounds,
	syncer.Responses:       cSyncResponses,
	syncer.GapsForgotten:   cSyncGapsForgotten,
	syncer.Envelopes:       cSyncEnvelopes,
	syncer.Pages:           cSyncPages,
	syncer.Requests:        cSyncRequests,
	syncer.Timeouts:        cSyncTimeouts,
	syncer.LatePages:       cSyncLatePages,
	syncer.Resumed:         cSyncResumed,
	syncer.Paused:          cSyncPaused,
	syncer.Stalled:         cSyncStalled,
	syncer.ServeServed:     cHistServed,
	syncer.ServedEnvelopes: cHistServedEnvelopes,
	syncer.ServeFailed:     cHistFailed,
	syncer.ServePaced:      cHistPaced,
	syncer.ServeNoRoom:     cHistNoRoom,
}

// syncParams returns the parameters of the syncer of n, which node/rx
// holds.
func syncParams(n *Node, rounds func(syncer.Round)) syncer.Params {
	c := &n.cfg
	return syncer.Params{
		Host: syncHost{n},
		Config: syncer.Config{
			SyncInterval: c.SyncInterval, SyncDelay: c.SyncDelay, SyncPeers: c.SyncPeers,
			SyncPageMessages: c.SyncPageMessages, SyncPageBytes: c.SyncPageBytes, SyncTimeout: c.SyncTimeout,
			EnvelopeTTL: c.EnvelopeTTL, HistoryServeRate: c.HistoryServeRate, HistoryServeBurst: c.HistoryServeBurst,
			HistoryServeConcurrency: c.HistoryServeConcurrency,
			Retention: func(p *channel.Policy, archive bool) time.Duration {
				age, _ := c.retention(p, archive)
				return age
			},
		},
		Self:      n.id.Pub,
		Store:     n.store,
		Channels:  n.chans.Set(),
		Subs:      n.chans.Subscriptions(),
		Log:       n.log.With("component", "sync"),
		RoundDone: rounds,
	}
}

// syncHost is what the syncer sees of the node ([syncer.Host]).
type syncHost struct{ n *Node }

func (h syncHost) Roster() *roster.Roster            { return h.n.Roster() }
func (h syncHost) LinkTo(k proto.PubKey) *peers.Link { return h.n.peers.Linked(k) }
func (h syncHost) Links() []*peers.Link              { return h.n.peers.Links() }

func (h syncHost) Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	return h.n.out.Sign(to, kind, ttl, fill)
}

func (h syncHost) Drop(reason syncer.Drop, se *proto.SignedEnvelope, src syncer.Source, err error) {
	h.n.rx.SyncDrop(reason, se, src, err)
}

func (h syncHost) Count(c syncer.Counter, d uint64) { h.n.metrics.add(syncCounters[c], d) }

func (h syncHost) CountRefused(serving bool, st proto.HistoryStatus) {
	if serving {
		cHistRefused.count(h.n.metrics, st)
	} else {
		cSyncRefused.count(h.n.metrics, st)
	}
}

// isArchive reports whether r marks k as an archive.
func isArchive(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(k)
	return ok && m.Archive
}
