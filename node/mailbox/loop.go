package mailbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport/logrl"
)

// Loop is the mailbox mirror: one goroutine ([Loop.Run]) that writes the
// file of every inbox item the node queues, and of every envelope it
// sends, moves the files of items marked read to read/, checkpoints what
// it wrote with one syncfs a second, pauses past the mailbox's quota,
// retries with backoff what a full disk refused, and at start rewrites
// from the store what a crash or a power loss left missing or cut short.
// It reads the node only through [Host].
type Loop struct {
	cfg LoopConfig
	q   chan Delivery
	rq  chan itemKey
	g   *gate
	rl  *logrl.Limiter

	// The rest is owned by Run's goroutine.

	// failing is set from the first write that leaves files missing until
	// a retry finds every file written; it makes the failure log once.
	failing bool
	// failedSince is the oldest delivery time of an item whose file is
	// missing: retries look for missing files from there.
	failedSince time.Time
	// missed counts the files that failed while failing, for the log.
	missed int
	// failures counts failed writes, so a retry can tell whether its own
	// writes failed.
	failures int
	backoff  time.Duration
	// retry fires the next retry; armed says whether it is running.
	retry *time.Timer
	armed bool
	// skip are items a retry wrote from the store that may still come
	// through the queue; the loop drops them there, once. Only items
	// whose file was written are in it, and only the queue's batches
	// consult it: a write from the store never skips.
	skip map[itemKey]bool
	// ckptFailing is set while checkpoints fail, so that the failure
	// logs once.
	ckptFailing bool
	heldSince   time.Time // when a due checkpoint first waited for a bulk write; zero when none waits
	// created is when the loop was made: nothing delivered before can
	// be in its queue.
	created time.Time
}

// Host is what the mirror loop reads from the node: the store queries it
// makes and the rendering of an envelope as its file's item. Its methods
// are called on the loop's goroutine, except Count, which the pruning
// of [Loop.RemovePruned] calls on its caller's.
type Host interface {
	// Inbox returns the inbox items delivered since since.
	Inbox(since time.Time) ([]history.InboxItem, error)
	// InboxEntry returns one inbox item, for its read state.
	InboxEntry(from proto.PubKey, id uuid.UUID) (history.InboxItem, error)
	// InboxRead reports which of the inbox items keys are marked read,
	// in one lookup for a whole batch.
	InboxRead(keys []history.ItemKey) ([]bool, error)
	// Envelope returns a stored envelope.
	Envelope(from proto.PubKey, id uuid.UUID) (*proto.SignedEnvelope, error)
	// Sent returns the delivery records of what the node sent, newest
	// first: one per sent envelope and recipient.
	Sent() ([]history.DeliveryRecord, error)
	// InboxItem renders an inbox item as its file's item.
	InboxItem(se *proto.SignedEnvelope, prio history.Priority, fromHistory bool, at time.Time) Item
	// SentItem renders an envelope the node sent as its sent folder's item.
	SentItem(se *proto.SignedEnvelope) Item
	// Count counts n events of c.
	Count(c Count, n uint64)
	// Paused counts a pause of the mirror for reason (a Pause* constant).
	Paused(reason string)
}

// Delivery is an envelope queued for the mirror: an inbox item or one the
// node sent. It is rendered on the loop's goroutine.
type Delivery interface {
	// Envelope is the signed envelope.
	Envelope() *proto.SignedEnvelope
	// MailboxItem renders it as its file's item.
	MailboxItem() Item
}

// Count names the mirror's counters; the host keeps them.
type Count uint8

// The mirror's counters.
const (
	CountFiles          Count = iota // files written
	CountBatches                     // batches written without error
	CountFailed                      // batches failed, not for a full disk
	CountDiskFull                    // batches failed for a full disk
	CountSyncFailed                  // checkpoints failed
	CountFilesFailed                 // files a failed batch left unwritten
	CountRetries                     // retries of missing files
	CountReconciled                  // files found missing and written
	CountTornRewritten               // files found cut short at start and rewritten
	CountReindexed                   // index lines restored at start
	CountCheckpoints                 // checkpoints
	CountPruneFailed                 // files of pruned envelopes not removed
	CountPruned                      // files of pruned envelopes removed
	CountHeldBack                    // files held back while paused
	CountReadMoveFailed              // read items' files not moved
	CountMovedRead                   // read items' files moved to read/
	CountReconciledSent              // sent folder files found missing and written
	NumCounts
)

// LoopConfig configures a [Loop].
type LoopConfig struct {
	// Root is the mailbox folder, Mirror the writer of its files.
	Root   string
	Mirror *Mirror
	Host   Host
	// Self is the node's key, the sender of what the sent folder holds.
	Self proto.PubKey
	// MaxFiles, MaxBytes and MinFree are the mailbox's limits (≤ 0 none):
	// past any the mirror pauses.
	MaxFiles int
	MaxBytes int64
	MinFree  int64
	// DiskSpace returns the bytes free and the size of the file system
	// holding a path; nil, the free space is unknown.
	DiskSpace func(path string) (free, total uint64, err error)
	// Bulk reports whether a large file is being written to the mailbox's
	// file system (an attachment's chunks): a checkpoint then waits, at
	// most maxCheckpointHold, since its syncfs would write that file's
	// data back too, under its writer and with the loop waiting on it.
	// nil: never.
	Bulk   func() bool
	Logger *slog.Logger
	// files writes mailbox files ([Mirror.Write], or Rewrite when
	// rewrite); nil is Mirror. Tests inject failures here.
	files func(rewrite bool, items ...Item) ([]string, error)
}

// QueueLen bounds the deliveries waiting to be mirrored. When it is full
// the caller of Queue waits: the mirror is never skipped.
const QueueLen = 4096

// reconcileWindow is how far back a starting mirror checks that every
// inbox item has its file (a crash can fall between the store commit and
// the file).
const reconcileWindow = 48 * time.Hour

// syncInterval is how often the loop makes the files written since its
// last checkpoint durable, when there are any.
const syncInterval = time.Second

// maxCheckpointHold bounds how long a checkpoint waits for a bulk write
// to end (LoopConfig.Bulk).
const maxCheckpointHold = 30 * time.Second

// checkMargin widens the window of files a start checks in full, for
// delivery times that are not strictly in queue order.
const checkMargin = 5 * time.Second

// retryMin and retryMax bound the backoff between attempts to write the
// files a failure (a full disk, most often) left missing.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// itemKey names an envelope: its sender and its id (senders may share ids).
type itemKey struct {
	from proto.PubKey
	id   uuid.UUID
}

func keyOf(it Item) itemKey { return itemKey{it.Env.From, it.Env.ID} }

// NewLoop returns the mirror loop of cfg, its file count taken.
func NewLoop(cfg LoopConfig) *Loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Loop{cfg: cfg, q: make(chan Delivery, QueueLen), rq: make(chan itemKey, QueueLen),
		g: newGate(cfg), rl: logrl.New(0, 0), created: time.Now()}
	if err := l.g.recount(); err != nil {
		cfg.Logger.Warn("mailbox: cannot count its files; its quota counts from zero", "err", err)
	}
	return l
}

// Queue hands d to the mirror. It waits while the queue is full, until
// ctx is done (shutting down: the next start writes it from the store).
func (l *Loop) Queue(ctx context.Context, d Delivery) {
	select {
	case l.q <- d:
	case <-ctx.Done():
	}
}

// Read has the loop move the file of the inbox item (from, id), marked
// read in the store, to read/. It waits like Queue; the next start moves
// what it could not.
func (l *Loop) Read(ctx context.Context, from proto.PubKey, id uuid.UUID) {
	select {
	case l.rq <- itemKey{from, id}:
	case <-ctx.Done():
	}
}

// Queued returns the length and the capacity of the queue.
func (l *Loop) Queued() (n, capacity int) { return len(l.q), cap(l.q) }

// Run writes queued items, as many as are waiting per batch, and
// checkpoints the files with one syncfs syncInterval after the first file
// a checkpoint has not covered (not at all while none is), until ctx is
// done; then it writes what is queued and checkpoints. After a write that
// leaves files missing it retries with backoff, writing them from the
// store (see retryMissing), so a disk that fills up and is freed again
// loses no file, without a restart.
func (l *Loop) Run(ctx context.Context) {
	defer func() {
		if l.retry != nil {
			l.retry.Stop()
		}
	}()
	_, written := l.reconcile(time.Now().Add(-reconcileWindow), true)
	// An item committed while the loop started is in the store, and in
	// the queue too: the start's reconcile may have written it already.
	for _, it := range written {
		if !it.Delivered.Before(l.created.Add(-time.Second)) {
			if l.skip == nil {
				l.skip = map[itemKey]bool{}
			}
			l.skip[keyOf(it)] = true
		}
	}
	batch := make([]Item, 0, 256)
	// The checkpoint timer runs only while files wait for one: an idle
	// mailbox's loop does not wake.
	tick := time.NewTimer(syncInterval)
	tick.Stop()
	defer tick.Stop()
	var newest time.Time // delivery time of the newest file written, not yet checkpointed
	for {
		batch = batch[:0]
		select {
		case d := <-l.q:
			batch = append(batch, d.MailboxItem())
		case k := <-l.rq:
			l.moveRead(k)
			continue
		case <-tick.C:
			if newest.IsZero() {
				continue
			}
			if l.holdCheckpoint(time.Now()) {
				tick.Reset(syncInterval)
				continue
			}
			l.checkpoint(newest)
			newest = time.Time{}
			continue
		case <-l.retryC():
			l.armed = false
			if l.failing {
				l.retryMissing()
			}
			continue
		case <-ctx.Done():
			if last := l.drain(batch); last.After(newest) {
				newest = last
			}
			if !newest.IsZero() {
				l.checkpoint(newest)
			}
			return
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case d := <-l.q:
				batch = append(batch, d.MailboxItem())
			default:
				break more
			}
		}
		if last := l.write(batch, false); last.After(newest) {
			if newest.IsZero() {
				tick.Reset(syncInterval)
			}
			newest = last
		}
	}
}

// arm schedules the next retry in d.
func (l *Loop) arm(d time.Duration) {
	if l.retry == nil {
		l.retry = time.NewTimer(d)
	} else {
		l.retry.Reset(d)
	}
	l.armed = true
}

// retryC is the retry timer's channel while it is armed, else nil.
func (l *Loop) retryC() <-chan time.Time {
	if !l.armed {
		return nil
	}
	return l.retry.C
}

// drain writes what is queued at shutdown and returns the newest
// delivery time it wrote.
func (l *Loop) drain(batch []Item) time.Time {
	for {
		select {
		case d := <-l.q:
			batch = append(batch, d.MailboxItem())
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return time.Time{}
	}
	return l.write(batch, false)
}
