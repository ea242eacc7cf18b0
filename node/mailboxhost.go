package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// The mailbox mirror is [mailbox.Loop]; its adapter [mailboxHost] opens
// and runs it with the outbox, hands it what the node delivers, sends and
// marks read, and answers its questions.

// The mailbox mirror's counters, by [mailbox.Count].
var (
	famMirrorFiles    = newFamily("meshd_mirror_files_written_total", "Mailbox mirror files written.")
	famMirrorBatches  = newFamily("meshd_mirror_batches_total", "Mailbox mirror batches written without error.")
	famMirrorFailures = newFamily("meshd_mirror_failures_total", "Mailbox mirror batches that failed, by reason.", "reason")
	famMirrorFilesBad = newFamily("meshd_mirror_files_failed_total", "Mailbox mirror files not written when their batch failed; they are written again on retry.")
	famMirrorRetries  = newFamily("meshd_mirror_retries_total", "Retries of mailbox files a failed batch left unwritten (after a full disk, with backoff).")
	famMirrorRecon    = newFamily("meshd_mirror_reconciled_files_total", "Mailbox files found missing at start and written.")
	famMirrorTorn     = newFamily("meshd_mirror_torn_files_rewritten_total", "Mailbox files found cut short by a power loss at start and rewritten.")
	famMirrorReindex  = newFamily("meshd_mirror_index_lines_restored_total", "Mailbox index lines found missing at start (a crash between a file and its line) and appended.")
	famMirrorCkpt     = newFamily("meshd_mirror_checkpoints_total", "Mailbox checkpoints: one syncfs making the files written since the last one durable.")
	famMirrorPruned   = newFamily("meshd_mirror_files_pruned_total", "Mailbox files removed because retention removed their envelope.")
	famMirrorHeld     = newFamily("meshd_mirror_files_held_back_total", "Mailbox files held back while the mirror was paused; written from the store once there is room.")
	famMirrorMoved    = newFamily("meshd_mirror_files_moved_read_total", "Mailbox files moved from inbox/ to read/ when their item was read.")

	mirrorCounters = [mailbox.NumCounts]counter{
		mailbox.CountFiles:          newCounter("mirror.files", famMirrorFiles),
		mailbox.CountBatches:        newCounter("mirror.batches", famMirrorBatches),
		mailbox.CountFailed:         newCounter("mirror.failed", famMirrorFailures, "error"),
		mailbox.CountDiskFull:       newCounter("mirror.disk_full", famMirrorFailures, "disk_full"),
		mailbox.CountSyncFailed:     newCounter("mirror.sync_failed", famMirrorFailures, "sync"),
		mailbox.CountFilesFailed:    newCounter("mirror.files_failed", famMirrorFilesBad),
		mailbox.CountRetries:        newCounter("mirror.retries", famMirrorRetries),
		mailbox.CountReconciled:     newCounter("mirror.reconciled", famMirrorRecon),
		mailbox.CountTornRewritten:  newCounter("mirror.torn_rewritten", famMirrorTorn),
		mailbox.CountReindexed:      newCounter("mirror.reindexed", famMirrorReindex),
		mailbox.CountCheckpoints:    newCounter("mirror.checkpoints", famMirrorCkpt),
		mailbox.CountPruneFailed:    newCounter("mirror.prune_failed", famMirrorFailures, "prune"),
		mailbox.CountPruned:         newCounter("mirror.pruned", famMirrorPruned),
		mailbox.CountHeldBack:       newCounter("mirror.held_back", famMirrorHeld),
		mailbox.CountReadMoveFailed: newCounter("mirror.read_move_failed", famMirrorFailures, "read_move"),
		mailbox.CountMovedRead:      newCounter("mirror.moved_read", famMirrorMoved),
		mailbox.CountReconciledSent: newEvent("mirror.reconciled_sent"),
	}
)

// open opens the mirror and the outbox under <home>/mailbox.
func (h mailboxHost) open() error {
	n := h.n
	mc := mailbox.DefaultConfig()
	// The history store holds every mirrored envelope durably before the
	// file is written, so the files need no fsync of their own: the mirror
	// loop checkpoints them with one syncfs, and a start after a power loss
	// rewrites what the last checkpoint did not cover.
	mc.SyncFiles = false
	mc.Access = n.cfg.MailboxAccess
	mc.Logger = n.log.With("component", "mailbox")
	oc := mailbox.DefaultOutboxConfig()
	oc.Access = n.cfg.MailboxAccess
	oc.NoNotify = n.cfg.OutboxNoNotify
	oc.Logger = n.log.With("component", "outbox")
	b, err := mailbox.OpenBox(n.home.MailboxDir(), mc, mailbox.LoopConfig{Host: h, Self: n.id.Pub,
		MaxFiles: n.cfg.MailboxMaxFiles, MaxBytes: n.cfg.MailboxMaxBytes, MinFree: n.cfg.MailboxMinFree,
		DiskSpace: func(p string) (uint64, uint64, error) { return diskSpace(p) }, Logger: mc.Logger,
		Bulk: func() bool { return n.attach != nil && n.attach.bulk() }}, oc)
	if err != nil {
		return err
	}
	n.mail = b
	return nil
}

// start runs the mirror loop and the outbox, each owned by the node's wg.
func (h mailboxHost) start() {
	n := h.n
	n.mail.Start(n.life.ctx, n.life.wg.Go, n.sendFromOutbox, n.log)
}

// inboxDelivery is what the commit stage hands the consumers of a new
// inbox item, the mailbox mirror and the event subscribers: the signed
// envelope and the facts of its delivery. Each consumer renders it on its
// own goroutine (MailboxItem, Item), so the commit goroutine only queues.
type inboxDelivery struct {
	n           *Node
	se          *proto.SignedEnvelope
	prio        history.Priority
	wakes       bool
	fromHistory bool
	at          time.Time // delivered
	// sent marks an envelope this node sent, for the mailbox's sent
	// folder; it goes to the mirror only.
	sent bool
}

// Item renders d for the event stream, on the subscriber's goroutine.
func (d *inboxDelivery) Item() api.Item {
	x := d.n.q.RenderEnvelope(d.se, history.InboxItem{Meta: history.Meta{ID: d.se.ID, FromHistory: d.fromHistory},
		Priority: d.prio, Wakes: d.wakes, Delivered: d.at})
	d.n.out.MarkFailed(&x, d.se)
	return x
}

// Envelope is d's envelope, for the mirror.
func (d *inboxDelivery) Envelope() *proto.SignedEnvelope { return d.se }

// MailboxItem renders d as its mailbox file's item, on the mirror loop's
// goroutine.
func (d *inboxDelivery) MailboxItem() mailbox.Item {
	h := mailboxHost{d.n}
	if d.sent {
		return h.SentItem(d.se)
	}
	return h.InboxItem(d.se, d.prio, d.fromHistory, d.at)
}

// delivered hands a new inbox item to the mirror and, when anyone
// listens, to the event subscribers. The mirror queue is never skipped:
// when it is full, the caller waits (shutting down, the next start
// writes it).
func (h mailboxHost) delivered(d inboxDelivery) {
	n := h.n
	d.n = n
	if n.mail != nil {
		n.mail.Loop.Queue(n.life.ctx, &d)
	}
	if n.q.Listening() {
		e := d // only what is published escapes
		n.q.Publish(&e)
	}
}

// sent queues an envelope this node sent for the mailbox's sent
// folder, named by its send time.
func (h mailboxHost) sent(se *proto.SignedEnvelope) {
	n := h.n
	if len(se.Attachments()) > 0 {
		n.attach.noteRefs(se, time.Time{})
	}
	if n.mail != nil {
		n.mail.Loop.Queue(n.life.ctx, &inboxDelivery{n: n, se: se, sent: true})
	}
}

// read runs after the store marked the inbox item (from, id) read: the
// mirror loop moves its file to read/ (the next start, if it stops
// first).
func (h mailboxHost) read(from proto.PubKey, id uuid.UUID) {
	if n := h.n; n.mail != nil {
		n.mail.Loop.Read(n.life.ctx, from, id)
	}
}

// mailboxHost is what the mirror loop reads from the node: the store and
// the rendering of a file's headers.
type mailboxHost struct{ n *Node }

// InboxItem renders an inbox item as its mailbox file's item: the headers
// the mirror writes that the envelope alone does not give.
func (h mailboxHost) InboxItem(se *proto.SignedEnvelope, prio history.Priority, fromHistory bool, at time.Time) mailbox.Item {
	n := h.n
	it := mailbox.Item{Env: se, Priority: prio.String(), FromHistory: fromHistory, Delivered: at}
	if m, ok := n.Roster().Known(se.From); ok {
		it.FromName = m.Name
	}
	it.ToText = n.destText(se.To)
	if f, ok := n.out.FailureOf(se); ok {
		it.Failure = &mailbox.Failure{State: f.State.String(), Reason: f.Reason}
	}
	return it
}

// SentItem renders an envelope this node sent as its sent folder's item.
func (h mailboxHost) SentItem(se *proto.SignedEnvelope) mailbox.Item {
	it := mailbox.Item{Env: se, Delivered: se.Time(), ToText: h.n.destText(se.To), Folder: mailbox.FolderSent}
	if m, ok := h.n.Roster().Member(se.From); ok {
		it.FromName = m.Name
	}
	return it
}

func (h mailboxHost) Inbox(since time.Time) ([]history.InboxItem, error) {
	return h.n.store.Inbox(history.InboxFilter{Since: since})
}

func (h mailboxHost) InboxEntry(from proto.PubKey, id uuid.UUID) (history.InboxItem, error) {
	return h.n.store.InboxEntry(from, id)
}

func (h mailboxHost) InboxRead(keys []history.ItemKey) ([]bool, error) {
	return h.n.store.InboxRead(keys)
}

func (h mailboxHost) Envelope(from proto.PubKey, id uuid.UUID) (*proto.SignedEnvelope, error) {
	st, err := h.n.store.Get(from, id)
	if err != nil {
		return nil, err
	}
	return st.Envelope()
}

func (h mailboxHost) Sent() ([]history.DeliveryRecord, error) {
	return h.n.store.Deliveries(history.DeliveryFilter{Limit: maxDeliveryRecords})
}

func (h mailboxHost) Count(c mailbox.Count, k uint64) { h.n.metrics.add(mirrorCounters[c], k) }

func (h mailboxHost) Paused(reason string) { h.n.metrics.Inc("mirror.paused." + reason) }

// status is the mailbox's count and pause, or nil before it is open.
func (h mailboxHost) status() *api.MailboxStatus {
	if h.n.mail == nil {
		return nil
	}
	return h.n.mail.Loop.Status()
}
