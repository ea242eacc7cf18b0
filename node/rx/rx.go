// Package rx is the receive side of a node: the pipeline every envelope
// that reaches it runs through, top to bottom (parse, dedupe by a known
// id, the sender's budget, signature, time, membership, destination and
// ACL, the channel quota: [Pipeline.Receive]), the commit stage that
// stores what passed in batches and then acknowledges it, and the
// hand-off of each new inbox item to its consumers, which render it on
// their own goroutines. History sync ([syncer.Syncer], [Pipeline.Sync])
// is held here too: its requests and responses arrive through the
// pipeline, and the catch-up pages it takes come back into the pipeline
// through the history stage, marked as history, so that no page calls
// back into the node.
//
// The pipeline reads the history store and the presence table directly,
// the components it asks on every envelope through small interfaces of
// their methods (the roster, the doctor's clock, channel administration,
// the send side's acks), and the rest of the node through [Host]:
// counting, the attachment budget, the consumers of a new inbox item and
// the inbox's wake-ups.
package rx

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport/logrl"
)

// Host is the node as the receive side sees it.
type Host interface {
	// Count adds d to the counter c.
	Count(c Counter, d uint64)
	// CountDrop counts an envelope dropped for reason r.
	CountDrop(r Drop)
	// CountDelivered counts an envelope of kind k stored new.
	CountDelivered(k proto.Kind)
	// AdmitAttachments removes from a commit batch, in place, the
	// envelopes refused by their sender's attachment budget, and refuses
	// them ([Pipeline.Drop] with DropQuota).
	AdmitAttachments(batch []Item) []Item
	// Delivered hands a new inbox item, stored, to its consumers (the
	// mailbox mirror, the event stream, the attachments' eager fetch),
	// which render it on their own goroutines. It runs on the commit
	// goroutine, so it only queues.
	Delivered(se *proto.SignedEnvelope, prio history.Priority, wakes, fromHistory bool, at time.Time)
	// Notify wakes the clients waiting on the inbox once a commit added
	// items (wake: one of them wakes).
	Notify(wake bool)
}

// Roster is where the pipeline reads the current roster.
type Roster interface {
	Current() *roster.Roster
}

// Clock takes the clock difference that envelopes fresh from their
// sender show (PROTOCOL.md §15 step 2).
type Clock interface {
	// ObserveFutureClock sees an envelope's time before the skew check.
	ObserveFutureClock(from proto.PubKey, sent time.Time, direct bool, now time.Time)
	// ObserveClock sees a presence announcement's time.
	ObserveClock(from proto.PubKey, sent time.Time, direct bool, now time.Time)
}

// Channels is channel administration as the pipeline asks it.
type Channels interface {
	// Set returns the channel policies.
	Set() *channel.Set
	// Subscriptions returns this node's subscriptions.
	Subscriptions() *channel.Subscriptions
	// OverQuota reports whether se, a member's channel Message, is past
	// its sender's quota, and counts it against the quota if not.
	OverQuota(se *proto.SignedEnvelope, history bool, now time.Time) bool
	// Blocked reports whether k is a blocked member.
	Blocked(k proto.PubKey) bool
}

// Acks is the send side as the pipeline uses it.
type Acks interface {
	// Ackable reports whether se, which came on via, is acknowledged
	// once stored.
	Ackable(se *proto.SignedEnvelope, via *peers.Link, fromHistory bool) bool
	// SendAcks sends the acks of ids stored, per link.
	SendAcks(acks map[*peers.Link][]uuid.UUID)
	// NoteRequest records a received Request, to answer and follow it.
	NoteRequest(se *proto.SignedEnvelope)
	// NoteReply records the reply depth of a stored message.
	NoteReply(id uuid.UUID, m *proto.Message)
}

// Counter is an event the pipeline counts; the node defines the metric
// of each.
type Counter uint8

// The counters of the pipeline.
const (
	Received        Counter = iota // an envelope entered the pipeline, before any check
	Presence                       // a presence announcement passed every check
	PresenceBytes                  // the bytes of those, with their frame type
	Commits                        // a batch committed
	InboxItems                     // an item added to the inbox
	SyncAlreadyHeld                // an envelope of a catch-up page held already (not a drop)
	NumCounters
)

// Config is what a pipeline reads directly.
type Config struct {
	Self     proto.PubKey // this node's key
	Store    *history.Store
	Roster   Roster          // the current roster (a rostergossip.Keeper)
	Presence *presence.Table // the peers' announcements, and when each was last heard from
	Clock    Clock           // the clock difference fresh envelopes show (a doctor.Diagnosis)
	Chans    Channels        // channel policies, subscriptions, quota and blocks (a chanadmin.Admin)
	Acks     Acks            // acks, and the requests and replies the send side follows (an outbound.Sender)
	Sync     syncer.Params   // the history sync the pipeline holds
	Log      *slog.Logger
	RateLog  *logrl.Limiter // the node's limiter of repetitive log lines
	// SenderStoreBytes and SenderStoreEnvelopes are the store's budget
	// per sender, for the log line of a refusal.
	SenderStoreBytes     int64
	SenderStoreEnvelopes int
	// Observe, if set, is called on the commit goroutine for every
	// envelope that reaches the inbox, with the time of its commit (a
	// seam for tests and benchmarks).
	Observe func(se *proto.SignedEnvelope, at time.Time)
}

// Pipeline is the receive side of a node. Make it with [New], run its
// goroutines with [Pipeline.Start].
type Pipeline struct {
	host Host
	cfg  Config
	ctx  context.Context
	log  *slog.Logger
	q    chan Item // admitted envelopes for the commit stage

	// Sync is history sync: the catch-up rounds of this node and the
	// serving of its peers' requests.
	Sync *syncer.Syncer
}

// QueueLen bounds admitted envelopes waiting for the commit stage. When
// it is full, link readers wait: backpressure, not loss.
const QueueLen = 4096

// maxCommitBatch bounds the envelopes stored in one transaction.
const maxCommitBatch = 512

// New returns the receive side of a node, with its history sync; ctx
// bounds the life of both.
func New(ctx context.Context, h Host, cfg Config) *Pipeline {
	p := &Pipeline{host: h, cfg: cfg, ctx: ctx, log: cfg.Log, q: make(chan Item, QueueLen)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.Sync = syncer.New(ctx, cfg.Sync)
	return p
}

// Start runs the commit stage, the history stage and history sync, each
// goroutine through spawn (the node's wait group), until the context
// ends.
func (p *Pipeline) Start(spawn func(func())) {
	spawn(p.commitLoop)
	p.Sync.Start()
	spawn(p.historyStage)
}

// Close stops history sync; the stages end with the context.
func (p *Pipeline) Close() { p.Sync.Close() }

// Queued returns the length and capacity of the commit stage's queue.
func (p *Pipeline) Queued() (n, capacity int) { return len(p.q), cap(p.q) }

// Source says how an envelope reached the node.
type Source struct {
	Link    *peers.Link   // the link it came on
	History bool          // part of a history sync response: skips the TTL check
	Page    *syncer.Batch // the catch-up page it came in, if any
}

// FromSender reports whether an envelope from k came straight from its
// sender over the sender's own link: only such a one shows the clock
// difference to the sender.
func (s Source) FromSender(k proto.PubKey) bool {
	return s.Link != nil && !s.History && s.Link.Key.Equal(k)
}

// peer names whom a received envelope's log lines are limited by: the
// link it came on, else its sender.
func (s Source) peer(se *proto.SignedEnvelope) string {
	switch {
	case s.Link != nil:
		return s.Link.Key.Fingerprint()
	case se != nil:
		return se.From.Fingerprint()
	}
	return ""
}

// Drop counts and logs a dropped envelope.
func (p *Pipeline) Drop(reason Drop, se *proto.SignedEnvelope, src Source, err error) {
	if reason == DropDuplicate && src.History {
		// Catch-up pages overlap what we hold by design (a join asks
		// without marks; a page repeats its boundary timestamp): not a
		// drop worth an operator's attention.
		p.host.Count(SyncAlreadyHeld, 1)
		return
	}
	p.host.CountDrop(reason)
	if reason == DropQuota && src.Page != nil && se != nil {
		src.Page.Refused(se.From) // catch-up keeps its holes for later
	}
	ok, suppressed := p.allow(slog.LevelDebug, src.peer(se), reason.String())
	if !ok {
		return
	}
	attrs := []any{"reason", reason.String()}
	if src.Link != nil {
		attrs = append(attrs, "link", src.Link.Key.Fingerprint())
	}
	if se != nil {
		attrs = append(attrs, "id", se.ID, "from", se.From.Fingerprint(), "kind", se.Kind.String())
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	p.log.Debug("envelope dropped", attrs...)
}

// SyncDrop counts and logs an envelope history sync dropped, as the
// pipeline's drop of the same name.
func (p *Pipeline) SyncDrop(reason syncer.Drop, se *proto.SignedEnvelope, src syncer.Source, err error) {
	p.Drop(syncDrops[reason], se, Source{Link: src.Link, History: src.History}, err)
}

// allow reports whether a line of (peer, reason) at lvl is to be written
// now, and how many were suppressed since the last one (the node's
// rate-limited log lines share the limiter).
func (p *Pipeline) allow(lvl slog.Level, peer, reason string) (ok bool, suppressed uint64) {
	if p.cfg.RateLog == nil || !p.log.Enabled(context.Background(), lvl) {
		return false, 0
	}
	return p.cfg.RateLog.Allow(peer+"|"+reason, time.Now())
}
