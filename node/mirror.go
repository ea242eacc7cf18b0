package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// The mailbox mirror's counters.
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
	famOutboxSends    = newFamily("meshd_outbox_sends_total", "Sends the outbox asked of the node, by result.", "result")

	cMirrorFiles         = newCounter("mirror.files", famMirrorFiles)
	cMirrorBatches       = newCounter("mirror.batches", famMirrorBatches)
	cMirrorFailed        = newCounter("mirror.failed", famMirrorFailures, "error")
	cMirrorDiskFull      = newCounter("mirror.disk_full", famMirrorFailures, "disk_full")
	cMirrorSyncFailed    = newCounter("mirror.sync_failed", famMirrorFailures, "sync")
	cMirrorFilesFailed   = newCounter("mirror.files_failed", famMirrorFilesBad)
	cMirrorRetries       = newCounter("mirror.retries", famMirrorRetries)
	cMirrorReconciled    = newCounter("mirror.reconciled", famMirrorRecon)
	cMirrorTornRewritten = newCounter("mirror.torn_rewritten", famMirrorTorn)
	cMirrorReindexed     = newCounter("mirror.reindexed", famMirrorReindex)
	cMirrorCheckpoints   = newCounter("mirror.checkpoints", famMirrorCkpt)
	cOutboxSent          = newCounter("outbox.sent", famOutboxSends, "sent")
	cOutboxRefused       = newCounter("outbox.refused", famOutboxSends, "refused")
)

// mirrorQueueLen bounds inbox items waiting to be mirrored. When it is
// full the commit stage waits: the mirror is never skipped.
const mirrorQueueLen = 4096

// mirrorReconcileWindow is how far back a starting node checks that every
// inbox item has its mailbox file (a crash can fall between the store
// commit and the file).
const mirrorReconcileWindow = 48 * time.Hour

// openMailbox opens the mirror and the outbox under <home>/mailbox.
func (n *Node) openMailbox() error {
	mc := mailbox.DefaultConfig()
	// The history store holds every mirrored envelope durably before the
	// file is written, so the files need no fsync of their own: the mirror
	// loop checkpoints them with one syncfs, and a start after a power loss
	// rewrites what the last checkpoint did not cover (reconcileMirror).
	mc.SyncFiles = false
	mc.Access = n.cfg.MailboxAccess
	mc.Logger = n.log.With("component", "mailbox")
	m, err := mailbox.Open(n.home.MailboxDir(), mc)
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	n.mirror = m
	n.gate = newMirrorGate(n.home.MailboxDir(), &n.cfg)
	if err := n.gate.recount(); err != nil {
		n.log.Warn("mailbox: cannot count its files; its quota counts from zero", "err", err)
	}
	oc := mailbox.DefaultOutboxConfig()
	oc.Access = n.cfg.MailboxAccess
	oc.Logger = n.log.With("component", "outbox")
	if n.outbox, err = mailbox.OpenOutbox(n.home.MailboxDir(), oc); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	n.mirrorq = make(chan inboxDelivery, mirrorQueueLen)
	n.readq = make(chan envKey, mirrorQueueLen)
	return nil
}

// startMailbox runs the mirror writer, the startup reconciliation and the
// outbox, each owned by n.wg.
func (n *Node) startMailbox() {
	n.wg.Add(2)
	go n.mirrorLoop()
	go func() {
		defer n.wg.Done()
		if err := n.outbox.Run(n.ctx, n.sendFromOutbox); err != nil && n.ctx.Err() == nil {
			n.log.Error("outbox stopped", "err", err)
		}
	}()
}

// inboxDelivery is what the commit stage hands the consumers of a new
// inbox item, the mailbox mirror and the event subscribers: the signed
// envelope and the facts of its delivery. Each consumer renders it on its
// own goroutine (mirrorItemOf, Item), so the commit goroutine only queues.
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
	x := d.n.renderEnvelope(d.se, history.InboxItem{Meta: history.Meta{ID: d.se.ID, FromHistory: d.fromHistory},
		Priority: d.prio, Wakes: d.wakes, Delivered: d.at})
	d.n.markFailed(&x, d.se)
	return x
}

// onInbox hands a new inbox item to the mirror and, when anyone listens,
// to the event subscribers. The mirror queue is never skipped: when it
// is full, the caller waits.
func (n *Node) onInbox(d inboxDelivery) {
	d.n = n
	select {
	case n.mirrorq <- d:
	case <-n.ctx.Done():
		// Shutting down: the startup reconciliation writes it next time.
	}
	if n.events.active() {
		e := d // only what is published escapes
		n.events.publish(&e)
	}
}

// mirrorItemOf renders a queued delivery as its mailbox file's item, on
// the mirror loop's goroutine.
func (n *Node) mirrorItemOf(d inboxDelivery) mailbox.Item {
	if d.sent {
		return n.sentItem(d.se)
	}
	return n.mirrorItem(d.se, d.prio, d.fromHistory, d.at)
}

func (n *Node) mirrorItem(se *proto.SignedEnvelope, prio history.Priority, fromHistory bool, at time.Time) mailbox.Item {
	it := mailbox.Item{Env: se, Priority: prio.String(), FromHistory: fromHistory, Delivered: at}
	if m, ok := n.Roster().Known(se.From); ok {
		it.FromName = m.Name
	}
	it.ToText = n.destText(se.To)
	if f, ok := n.failureOf(se); ok {
		it.Failure = &mailbox.Failure{State: f.State.String(), Reason: f.Reason}
	}
	return it
}

// mirrorSyncInterval is how often the mirror loop makes the files written
// since its last checkpoint durable, when there are any.
const mirrorSyncInterval = time.Second

// mirrorCheckpointFile, in the mailbox root, holds the delivery time (Unix
// milliseconds) of the newest item whose file the last checkpoint made
// durable. Readers of the mailbox skip names that start with ".".
const mirrorCheckpointFile = ".synced"

// mirrorCheckMargin widens the window of files a start checks in full, for
// delivery times that are not strictly in queue order.
const mirrorCheckMargin = 5 * time.Second

// mirrorRetryMin and mirrorRetryMax bound the backoff between attempts
// to write the files a failure (a full disk, most often) left missing.
const (
	mirrorRetryMin = time.Second
	mirrorRetryMax = time.Minute
)

// mirrorRun is the mirror loop's state. It is owned by the loop's
// goroutine: nothing else touches it.
type mirrorRun struct {
	n *Node
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
	skip map[envKey]bool
	// files writes mailbox files ([mailbox.Mirror.Write], or Rewrite when
	// rewrite); nil is the node's mirror. Tests inject failures here.
	files func(rewrite bool, items ...mailbox.Item) ([]string, error)
}

// envKey names an envelope: its sender and its id (senders may share ids).
type envKey struct {
	from proto.PubKey
	id   uuid.UUID
}

func keyOf(it mailbox.Item) envKey { return envKey{it.Env.From, it.Env.ID} }

// unwritten returns the items of queued that are not in written.
func (r *mirrorRun) unwritten(queued, written []mailbox.Item) []mailbox.Item {
	if len(queued) == 0 {
		return nil
	}
	done := make(map[envKey]bool, len(written))
	for _, it := range written {
		done[keyOf(it)] = true
	}
	var rest []mailbox.Item
	for _, it := range queued {
		if !done[keyOf(it)] {
			rest = append(rest, it)
		}
	}
	return rest
}

// arm schedules the next retry in d.
func (r *mirrorRun) arm(d time.Duration) {
	if r.retry == nil {
		r.retry = time.NewTimer(d)
	} else {
		r.retry.Reset(d)
	}
	r.armed = true
}

// retryC is the retry timer's channel while it is armed, else nil.
func (r *mirrorRun) retryC() <-chan time.Time {
	if !r.armed {
		return nil
	}
	return r.retry.C
}

// mirrorLoop writes queued items, as many as are waiting per batch, and
// checkpoints the files with one syncfs per mirrorSyncInterval. After a
// write that leaves files missing it retries with backoff, writing them
// from the store (see retryMissing), so a disk that fills up and is freed
// again loses no file, without a restart.
func (n *Node) mirrorLoop() {
	defer n.wg.Done()
	r := &mirrorRun{n: n}
	defer func() {
		if r.retry != nil {
			r.retry.Stop()
		}
	}()
	r.reconcile(time.Now().Add(-mirrorReconcileWindow), true)
	batch := make([]mailbox.Item, 0, 256)
	tick := time.NewTicker(mirrorSyncInterval)
	defer tick.Stop()
	var newest time.Time // delivery time of the newest file written, not yet checkpointed
	for {
		batch = batch[:0]
		select {
		case d := <-n.mirrorq:
			batch = append(batch, n.mirrorItemOf(d))
		case k := <-n.readq:
			r.moveRead(k)
			continue
		case <-tick.C:
			if !newest.IsZero() {
				n.checkpointMirror(newest)
				newest = time.Time{}
			}
			continue
		case <-r.retryC():
			r.armed = false
			if r.failing {
				r.retryMissing()
			}
			continue
		case <-n.ctx.Done():
			if last := r.drain(batch); last.After(newest) {
				newest = last
			}
			if !newest.IsZero() {
				n.checkpointMirror(newest)
			}
			return
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case d := <-n.mirrorq:
				batch = append(batch, n.mirrorItemOf(d))
			default:
				break more
			}
		}
		if last := r.write(batch, false); last.After(newest) {
			newest = last
		}
	}
}

// drain writes what is queued at shutdown and returns the newest
// delivery time it wrote.
func (r *mirrorRun) drain(batch []mailbox.Item) time.Time {
	for {
		select {
		case d := <-r.n.mirrorq:
			batch = append(batch, r.n.mirrorItemOf(d))
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return time.Time{}
	}
	return r.write(batch, false)
}

// retryMissing writes the files of the items delivered since the first
// failure that have none. When every one is written the mirror is healthy
// again, and says so once; otherwise the next retry waits twice as long.
func (r *mirrorRun) retryMissing() {
	n := r.n
	n.metrics.inc(cMirrorRetries)
	if n.gate.paused() {
		// Count again: an agent may have removed files, and the free
		// space may have grown.
		if err := n.gate.recount(); err != nil {
			n.log.Debug("mailbox: count files", "err", err)
		}
		if reason := n.gate.check(); reason != "" {
			n.onMirrorPause(reason)
			r.arm(mirrorPauseRetry)
			return
		}
	}
	before := r.failures
	// The items still queued are in the store too: take them out of the
	// queue first, so that each gets one file, written from the store.
	// Those the last retry wrote have theirs.
	var queued []mailbox.Item
	for len(queued) < mirrorQueueLen {
		select {
		case d := <-n.mirrorq:
			if k := (envKey{d.se.From, d.se.ID}); r.skip[k] {
				delete(r.skip, k)
				continue
			}
			queued = append(queued, n.mirrorItemOf(d))
			continue
		default:
		}
		break
	}
	start := time.Now()
	tried, written := r.reconcile(r.failedSince.Add(-mirrorCheckMargin), false)
	// An item committed but not yet queued when the queue was read may
	// still arrive: the loop skips those the retry wrote. Not those taken
	// from the queue above (they never come again), nor those whose
	// write failed (the queue's copy, or the next retry, writes them).
	inQueue := make(map[envKey]bool, len(queued))
	for _, it := range queued {
		inQueue[keyOf(it)] = true
	}
	clear(r.skip)
	for _, it := range written {
		if it.Delivered.After(start.Add(-mirrorCheckMargin)) && !inQueue[keyOf(it)] {
			if r.skip == nil {
				r.skip = map[envKey]bool{}
			}
			r.skip[keyOf(it)] = true
		}
	}
	// The queued items reconcile did not try were committed after it
	// read the store: they have no file yet.
	if rest := r.unwritten(queued, tried); len(rest) > 0 {
		r.put(rest, false)
	}
	if r.failures != before {
		r.backoff = min(2*r.backoff, mirrorRetryMax)
		r.arm(r.backoff)
		return
	}
	n.log.Info("mailbox mirror: writing files again; the files that failed are written", "missed", r.missed)
	r.failing, r.missed, r.backoff, r.failedSince = false, 0, 0, time.Time{}
}

// checkpointMirror makes the files written so far durable and records
// that every item delivered up to newest has its file on disk. The record
// itself is written without fsync: the next checkpoint (or the file
// system's own writeback) persists it, and an older record only makes the
// next start check more files. So it is not fsutil.WriteAtomic, which
// fsyncs the file and the directory; its one fixed temporary name is
// also overwritten by the next checkpoint rather than left behind.
func (n *Node) checkpointMirror(newest time.Time) {
	err := n.mirror.Sync()
	if err == nil {
		n.metrics.inc(cMirrorCheckpoints)
		path := filepath.Join(n.home.MailboxDir(), mirrorCheckpointFile)
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, []byte(strconv.FormatInt(newest.UnixMilli(), 10)+"\n"), 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			err = fmt.Errorf("record checkpoint: %w", err)
		}
	}
	switch {
	case err != nil:
		// The next start checks more files; nothing is lost.
		n.metrics.inc(cMirrorSyncFailed)
		if !n.mirrorCkptFailing {
			n.log.Error("mailbox mirror: checkpoint failed; a start after a power loss will check the files since the last one", "err", err)
		}
		n.mirrorCkptFailing = true
	case n.mirrorCkptFailing:
		n.log.Info("mailbox mirror: checkpoints work again")
		n.mirrorCkptFailing = false
	}
}

// mirrorCheckpoint reads the last checkpoint; zero when there is none or
// it cannot be read.
func (n *Node) mirrorCheckpoint() time.Time {
	b, err := os.ReadFile(filepath.Join(n.home.MailboxDir(), mirrorCheckpointFile))
	if err != nil {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// write writes a batch of mailbox files and returns the newest delivery
// time in it, for the next checkpoint. rewrite writes files a power loss
// cut short (see [mailbox.Mirror.Rewrite]). A batch that leaves files
// missing is counted; the first one logs and starts the retries.
func (r *mirrorRun) write(batch []mailbox.Item, rewrite bool) (newest time.Time) {
	if len(r.skip) > 0 && !rewrite {
		kept := batch[:0:0]
		for _, it := range batch {
			if k := keyOf(it); r.skip[k] {
				delete(r.skip, k)
				continue
			}
			kept = append(kept, it)
		}
		if batch = kept; len(batch) == 0 {
			return newest
		}
	}
	r.readFolders(batch)
	newest, _ = r.put(batch, rewrite)
	return newest
}

// put is write without the skip list, for items read from the store: it
// returns the newest delivery time in batch and the items whose files it
// wrote.
func (r *mirrorRun) put(batch []mailbox.Item, rewrite bool) (newest time.Time, written []mailbox.Item) {
	n := r.n
	oldest := batch[0].Delivered
	for _, it := range batch {
		if it.Delivered.After(newest) {
			newest = it.Delivered
		}
		if it.Delivered.Before(oldest) {
			oldest = it.Delivered
		}
	}
	if reason := n.gate.check(); reason != "" {
		n.onMirrorPause(reason)
		r.holdBack(len(batch), oldest)
		return time.Time{}, nil
	}
	n.onMirrorPause("")
	paths, err := r.writeFiles(rewrite, batch)
	n.metrics.add(cMirrorFiles, uint64(len(paths)))
	n.gate.wrote(len(paths), filesSize(paths))
	if err == nil {
		n.metrics.inc(cMirrorBatches)
		if r.failing && !r.armed {
			// The disk has room again: write what is missing now.
			r.backoff = mirrorRetryMin
			r.arm(0)
		}
		return newest, batch
	}
	written = writtenItems(batch, paths)
	// The envelopes are in the history store: the retries (or the next
	// start) write the missing files from there.
	r.failures++
	missing := len(batch) - len(paths)
	if errors.Is(err, mailbox.ErrDiskFull) {
		n.metrics.inc(cMirrorDiskFull)
	} else {
		n.metrics.inc(cMirrorFailed)
	}
	n.metrics.add(cMirrorFilesFailed, uint64(missing))
	if r.failedSince.IsZero() || oldest.Before(r.failedSince) {
		r.failedSince = oldest
	}
	r.missed += missing
	if !r.failing {
		r.failing = true
		if errors.Is(err, mailbox.ErrDiskFull) {
			n.log.Error("mailbox mirror: disk full; retrying with backoff until the missing files are written", "missing", missing, "err", err)
		} else {
			n.log.Error("mailbox mirror: files not written; retrying with backoff until they are", "missing", missing, "err", err)
		}
		r.backoff = mirrorRetryMin
		r.arm(r.backoff)
	} else {
		n.log.Debug("mailbox mirror: files not written", "missing", missing, "err", err)
	}
	return newest, written
}

// writeFiles writes the files of batch through r.files, or the mirror.
func (r *mirrorRun) writeFiles(rewrite bool, batch []mailbox.Item) ([]string, error) {
	switch {
	case r.files != nil:
		return r.files(rewrite, batch...)
	case rewrite:
		return r.n.mirror.Rewrite(batch...)
	}
	return r.n.mirror.Write(batch...)
}

// writtenItems returns the items of batch whose files are among paths.
// The mirror writes in batch order and returns the paths it wrote in
// that order, so paths is a subsequence of batch, matched by tag.
func writtenItems(batch []mailbox.Item, paths []string) []mailbox.Item {
	var out []mailbox.Item
	j := 0
	for _, it := range batch {
		if j == len(paths) {
			break
		}
		if tag, ok := mailbox.TagOf(filepath.Base(paths[j])); ok && tag == mailbox.Tag(it.Env.ID.String()) {
			out = append(out, it)
			j++
		}
	}
	return out
}

// reconcile writes the mailbox files of inbox items delivered since since
// that have none: a crash between the store commit and the mirror write,
// or a full disk, loses no file. At start, files of items delivered
// after the last checkpoint were written without fsync, so a power loss
// may have left them empty or cut short under their final names: those
// are read, and rewritten unless whole; and the index lines a crash kept
// from their day's index are appended. It returns the items whose files
// it tried to write and, of those, the ones it wrote (a failure is
// counted in r.failures). It checkpoints only when every write worked.
func (r *mirrorRun) reconcile(since time.Time, atStart bool) (tried, written []mailbox.Item) {
	st, sw := r.reconcileSent(since)
	it, iw := r.reconcileInbox(since, atStart)
	return append(st, it...), append(sw, iw...)
}

// reconcileInbox is reconcile for the inbox items' files.
func (r *mirrorRun) reconcileInbox(since time.Time, atStart bool) (tried, written []mailbox.Item) {
	n := r.n
	before := r.failures
	items, err := n.store.Inbox(history.InboxFilter{Since: since})
	if err != nil {
		n.log.Error("mailbox reconcile", "err", err)
		r.failures++
		return
	}
	checkFrom := n.mirrorCheckpoint().Add(-mirrorCheckMargin)
	if !atStart {
		// Files written in this run are whole unless a write failed, and
		// a failed write leaves no file.
		checkFrom = time.Now()
	}
	var missing, torn, recent []mailbox.Item
	var recentPaths []string
	files := &mirrorFiles{root: n.home.MailboxDir(), folders: map[string]map[string][]string{}}
	shared := sharedIDs(items)
	var newest time.Time
	for _, it := range items {
		if it.Delivered.After(newest) {
			newest = it.Delivered
		}
		path := files.path(it.ID, it.Delivered)
		if shared[it.ID] {
			path = files.pathFrom(it.ID, it.From, it.Delivered)
		}
		cut := false
		if path != "" && it.Delivered.After(checkFrom) {
			if ok, err := mailbox.Complete(path); err == nil && !ok {
				n.log.Warn("mailbox: rewriting a file cut short by a crash", "path", path)
				if err := os.Remove(path); err != nil {
					n.log.Error("mailbox reconcile: remove torn file", "path", path, "err", err)
					continue
				}
				path, cut = "", true
			}
		}
		if path != "" && it.Read && folderOfPath(path) == mailbox.FolderInbox {
			// Read while the mirror was stopped, or its move failed.
			r.move(path)
		}
		recheck := path != "" && it.Delivered.After(checkFrom)
		if path != "" && !recheck {
			continue
		}
		st, err := n.store.Get(it.From, it.ID)
		if err != nil {
			continue
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		mi := n.mirrorItem(se, it.Priority, it.FromHistory, it.Delivered)
		if it.Read {
			mi.Folder = mailbox.FolderRead
		}
		switch {
		case recheck:
			recent, recentPaths = append(recent, mi), append(recentPaths, path)
		case cut:
			torn = append(torn, mi)
		default:
			missing = append(missing, mi)
		}
	}
	if len(recent) > 0 {
		added, err := n.mirror.Reindex(recent, recentPaths)
		if err != nil {
			n.log.Error("mailbox reconcile: index lines", "err", err)
		}
		if added > 0 {
			n.log.Info("mailbox: index lines missing since the last run appended", "count", added)
			n.metrics.add(cMirrorReindexed, uint64(added))
		}
	}
	if len(missing)+len(torn) == 0 {
		if !newest.IsZero() && atStart {
			// Every file checked is whole: record it, so the next start
			// reads only what comes after.
			n.checkpointMirror(newest)
		}
		return
	}
	if atStart {
		n.log.Info("mailbox: writing files missing since the last run", "count", len(missing)+len(torn), "cut_short", len(torn))
	} else {
		n.log.Info("mailbox: writing files that failed", "count", len(missing))
	}
	n.metrics.add(cMirrorReconciled, uint64(len(missing)+len(torn)))
	n.metrics.add(cMirrorTornRewritten, uint64(len(torn)))
	// From the store: the queue's skip list does not apply.
	for i := 0; i < len(missing); i += 256 {
		_, w := r.put(missing[i:min(i+256, len(missing))], false)
		written = append(written, w...)
	}
	// A file cut short may be in its day's index already.
	for i := 0; i < len(torn); i += 256 {
		_, w := r.put(torn[i:min(i+256, len(torn))], true)
		written = append(written, w...)
	}
	if r.failures == before {
		n.checkpointMirror(newest)
	}
	return append(missing, torn...), written
}

// mirrorFiles finds the mailbox files of envelopes. It reads each inbox
// folder once and remembers its files by envelope tag, so a start that
// checks thousands of items reads each day's folder once, not once per
// item.
type mirrorFiles struct {
	root    string
	folders map[string]map[string][]string // folder → tag → paths, by name
	// in are the day folders looked in; nil: inbox and read.
	in []string
}

// path returns id's file in the inbox folders of the days around its
// delivery; "" when there is none. Of several (a tag shared within a
// second), the first by name.
func (f *mirrorFiles) path(id uuid.UUID, at time.Time) string {
	if ps := f.paths(id, at); len(ps) > 0 {
		return ps[0]
	}
	return ""
}

// paths returns the files with id's tag in the inbox folders of the days
// around its delivery, by day and then by name.
func (f *mirrorFiles) paths(id uuid.UUID, at time.Time) []string {
	tag := mailbox.Tag(id.String())
	var out []string
	in := f.in
	if in == nil {
		in = []string{mailbox.FolderInbox, mailbox.FolderRead}
	}
	for _, d := range []time.Time{at.Add(-24 * time.Hour), at, at.Add(24 * time.Hour)} {
		for _, folder := range in {
			dir := filepath.Join(f.root, d.UTC().Format(time.DateOnly), folder)
			files, ok := f.folders[dir]
			if !ok {
				files = map[string][]string{}
				ents, _ := os.ReadDir(dir) // sorted by name; a missing folder holds nothing
				for _, e := range ents {
					if t, ok := mailbox.TagOf(e.Name()); ok {
						files[t] = append(files[t], filepath.Join(dir, e.Name()))
					}
				}
				f.folders[dir] = files
			}
			out = append(out, files[tag]...)
		}
	}
	return out
}

// pathFrom is path for an id that several senders' items share (an
// envelope is its sender and its id): the file with id's tag whose
// From-Key header names from, or "".
func (f *mirrorFiles) pathFrom(id uuid.UUID, from proto.PubKey, at time.Time) string {
	want := "\nFrom-Key: " + from.String() + "\n"
	for _, p := range f.paths(id, at) {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		head := make([]byte, 1024) // From and From-Key are the first two lines
		k, _ := io.ReadFull(fh, head)
		fh.Close()
		if strings.Contains("\n"+string(head[:k]), want) {
			return p
		}
	}
	return ""
}

// sharedIDs returns the ids that more than one of items have.
func sharedIDs(items []history.InboxItem) map[uuid.UUID]bool {
	n := make(map[uuid.UUID]int, len(items))
	var out map[uuid.UUID]bool
	for _, it := range items {
		if n[it.ID]++; n[it.ID] == 2 {
			if out == nil {
				out = map[uuid.UUID]bool{}
			}
			out[it.ID] = true
		}
	}
	return out
}

// sendFromOutbox signs and sends a file an agent dropped in the outbox,
// through the same paths as the control API.
func (n *Node) sendFromOutbox(m *mailbox.OutgoingMessage) (mailbox.Result, error) {
	to := m.To
	if m.Channel != "" {
		to = "#" + m.Channel
	} else if m.Peer != "" {
		to = m.Peer
	}
	var (
		sent *api.Sent
		err  error
	)
	if m.Read != nil {
		return n.readFromOutbox(m)
	}
	switch m.Kind {
	case proto.KindMessage:
		req := api.Send{To: to, Body: m.Body, Attachments: m.Attach}
		if m.InReplyTo != nil {
			req.InReplyTo = m.InReplyTo.String()
		}
		sent, err = n.Send(req)
	case proto.KindRequest:
		req := api.Request{To: to, Intent: m.Intent, Attachments: m.Attach}
		if len(m.Params) > 0 {
			if req.Params, err = proto.CBORToJSON(m.Params); err != nil {
				return mailbox.Result{}, err
			}
		}
		if m.ReplyTo != nil {
			req.ReplyTo = m.ReplyTo.String()
		}
		sent, err = n.Request(req)
	case proto.KindResponse:
		// The To header names the requester: it is honoured, so a reused
		// request id never sends the answer to another member.
		req := api.Respond{RequestID: m.RequestID.String(), Status: m.Status.String(), To: to, Attachments: m.Attach}
		if len(m.Result) > 0 {
			if req.Result, err = proto.CBORToJSON(m.Result); err != nil {
				return mailbox.Result{}, err
			}
		}
		sent, err = n.Respond(req)
	default:
		return mailbox.Result{}, fmt.Errorf("kind %s cannot be sent from the outbox", m.Kind)
	}
	if err != nil {
		n.metrics.inc(cOutboxRefused)
		return mailbox.Result{}, outboxError(err)
	}
	n.metrics.inc(cOutboxSent)
	var res mailbox.Result
	res.MessageID, _ = uuid.Parse(sent.ID)
	if sent.RequestID != "" {
		res.RequestID, _ = uuid.Parse(sent.RequestID)
	}
	return res, nil
}

// outboxError gives a refusal its reason word for the .error file.
func outboxError(err error) error {
	reason, hint := "refused", ""
	switch {
	case errors.Is(err, ErrNotFound):
		reason = "not-found"
		hint = "check the To: header against meshctl channel list / meshctl roster show"
	case errors.Is(err, ErrForbidden):
		reason = "forbidden"
	case errors.Is(err, ErrBadRequest):
		reason = "invalid"
	}
	msg := err.Error()
	for _, k := range []error{ErrBadRequest, ErrNotFound, ErrForbidden} {
		msg = strings.TrimPrefix(msg, k.Error()+": ")
	}
	return &mailbox.SendError{Reason: reason, Hint: hint, Err: errors.New(msg)}
}
