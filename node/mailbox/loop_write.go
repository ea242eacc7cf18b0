package mailbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CheckpointFile, in the mailbox root, holds the delivery time (Unix
// milliseconds) of the newest item whose file the last checkpoint made
// durable. Readers of the mailbox skip names that start with ".".
const CheckpointFile = ".synced"

// retryMissing writes the files of the items delivered since the first
// failure that have none. When every one is written the mirror is healthy
// again, and says so once; otherwise the next retry waits twice as long.
func (l *Loop) retryMissing() {
	l.cfg.Host.Count(CountRetries, 1)
	if l.g.paused() {
		// Count again: an agent may have removed files, and the free
		// space may have grown.
		if err := l.g.recount(); err != nil {
			l.cfg.Logger.Debug("mailbox: count files", "err", err)
		}
		if reason := l.g.check(); reason != "" {
			l.onPause(reason)
			l.arm(pauseRetry)
			return
		}
	}
	before := l.failures
	// The items still queued are in the store too: take them out of the
	// queue first, so that each gets one file, written from the store.
	// Those the last retry wrote have theirs.
	var queued []Item
	for len(queued) < QueueLen {
		select {
		case d := <-l.q:
			se := d.Envelope()
			if k := (itemKey{se.From, se.ID}); l.skip[k] {
				delete(l.skip, k)
				continue
			}
			queued = append(queued, d.MailboxItem())
			continue
		default:
		}
		break
	}
	start := time.Now()
	tried, written := l.reconcile(l.failedSince.Add(-checkMargin), false)
	// An item committed but not yet queued when the queue was read may
	// still arrive: the loop skips those the retry wrote. Not those taken
	// from the queue above (they never come again), nor those whose
	// write failed (the queue's copy, or the next retry, writes them).
	inQueue := make(map[itemKey]bool, len(queued))
	for _, it := range queued {
		inQueue[keyOf(it)] = true
	}
	clear(l.skip)
	for _, it := range written {
		if it.Delivered.After(start.Add(-checkMargin)) && !inQueue[keyOf(it)] {
			if l.skip == nil {
				l.skip = map[itemKey]bool{}
			}
			l.skip[keyOf(it)] = true
		}
	}
	// The queued items reconcile did not try were committed after it
	// read the store: they have no file yet.
	if rest := unwritten(queued, tried); len(rest) > 0 {
		l.put(rest, false)
	}
	if l.failures != before {
		l.backoff = min(2*l.backoff, retryMax)
		l.arm(l.backoff)
		return
	}
	l.cfg.Logger.Info("mailbox mirror: writing files again; the files that failed are written", "missed", l.missed)
	l.failing, l.missed, l.backoff, l.failedSince = false, 0, 0, time.Time{}
}

// unwritten returns the items of queued that are not in written.
func unwritten(queued, written []Item) []Item {
	if len(queued) == 0 {
		return nil
	}
	done := make(map[itemKey]bool, len(written))
	for _, it := range written {
		done[keyOf(it)] = true
	}
	var rest []Item
	for _, it := range queued {
		if !done[keyOf(it)] {
			rest = append(rest, it)
		}
	}
	return rest
}

// holdCheckpoint reports whether a due checkpoint waits at now: while
// a bulk write goes on (LoopConfig.Bulk), for at most maxCheckpointHold
// from the first wait.
func (l *Loop) holdCheckpoint(now time.Time) bool {
	if l.cfg.Bulk == nil || !l.cfg.Bulk() {
		l.heldSince = time.Time{}
		return false
	}
	if l.heldSince.IsZero() {
		l.heldSince = now
	}
	if now.Sub(l.heldSince) >= maxCheckpointHold {
		l.heldSince = time.Time{}
		return false
	}
	return true
}

// checkpoint makes the files written so far durable and records that
// every item delivered up to newest has its file on disk. The record
// itself is written without fsync: the next checkpoint (or the file
// system's own writeback) persists it, and an older record only makes the
// next start check more files. So it is not fsutil.WriteAtomic, which
// fsyncs the file and the directory; its one fixed temporary name is
// also overwritten by the next checkpoint rather than left behind.
func (l *Loop) checkpoint(newest time.Time) {
	err := l.cfg.Mirror.Sync()
	if err == nil {
		l.cfg.Host.Count(CountCheckpoints, 1)
		path := filepath.Join(l.cfg.Root, CheckpointFile)
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
		l.cfg.Host.Count(CountSyncFailed, 1)
		if !l.ckptFailing {
			l.cfg.Logger.Error("mailbox mirror: checkpoint failed; a start after a power loss will check the files since the last one", "err", err)
		}
		l.ckptFailing = true
	case l.ckptFailing:
		l.cfg.Logger.Info("mailbox mirror: checkpoints work again")
		l.ckptFailing = false
	}
}

// ReadCheckpoint reads the last checkpoint of the mailbox at root; zero
// when there is none or it cannot be read.
func ReadCheckpoint(root string) time.Time {
	b, err := os.ReadFile(filepath.Join(root, CheckpointFile))
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
// cut short (see [Mirror.Rewrite]). A batch that leaves files missing is
// counted; the first one logs and starts the retries.
func (l *Loop) write(batch []Item, rewrite bool) (newest time.Time) {
	if len(l.skip) > 0 && !rewrite {
		kept := batch[:0:0]
		for _, it := range batch {
			if k := keyOf(it); l.skip[k] {
				delete(l.skip, k)
				continue
			}
			kept = append(kept, it)
		}
		if batch = kept; len(batch) == 0 {
			return newest
		}
	}
	l.readFolders(batch)
	newest, _ = l.put(batch, rewrite)
	return newest
}

// put is write without the skip list, for items read from the store: it
// returns the newest delivery time in batch and the items whose files it
// wrote.
func (l *Loop) put(batch []Item, rewrite bool) (newest time.Time, written []Item) {
	h := l.cfg.Host
	oldest := batch[0].Delivered
	for _, it := range batch {
		if it.Delivered.After(newest) {
			newest = it.Delivered
		}
		if it.Delivered.Before(oldest) {
			oldest = it.Delivered
		}
	}
	if reason := l.g.check(); reason != "" {
		l.onPause(reason)
		l.holdBack(len(batch), oldest)
		return time.Time{}, nil
	}
	l.onPause("")
	paths, bytes, err := l.writeFiles(rewrite, batch)
	h.Count(CountFiles, uint64(len(paths)))
	l.g.wrote(len(paths), bytes)
	if err == nil {
		h.Count(CountBatches, 1)
		if l.failing && !l.armed {
			// The disk has room again: write what is missing now.
			l.backoff = retryMin
			l.arm(0)
		}
		return newest, batch
	}
	written = writtenItems(batch, paths)
	// The envelopes are in the history store: the retries (or the next
	// start) write the missing files from there.
	l.failures++
	missing := len(batch) - len(paths)
	if errors.Is(err, ErrDiskFull) {
		h.Count(CountDiskFull, 1)
	} else {
		h.Count(CountFailed, 1)
	}
	h.Count(CountFilesFailed, uint64(missing))
	if l.failedSince.IsZero() || oldest.Before(l.failedSince) {
		l.failedSince = oldest
	}
	l.missed += missing
	if !l.failing {
		l.failing = true
		if errors.Is(err, ErrDiskFull) {
			l.cfg.Logger.Error("mailbox mirror: disk full; retrying with backoff until the missing files are written", "missing", missing, "err", err)
		} else {
			l.cfg.Logger.Error("mailbox mirror: files not written; retrying with backoff until they are", "missing", missing, "err", err)
		}
		l.backoff = retryMin
		l.arm(l.backoff)
	} else {
		l.cfg.Logger.Debug("mailbox mirror: files not written", "missing", missing, "err", err)
	}
	return newest, written
}

// writeFiles writes the files of batch through cfg.files, or the mirror,
// and returns the paths written and their bytes. The mirror counts the
// bytes it wrote; a stat of each file cost the loop a system call per
// file.
func (l *Loop) writeFiles(rewrite bool, batch []Item) (paths []string, bytes int64, err error) {
	if l.cfg.files != nil {
		paths, err = l.cfg.files(rewrite, batch...)
		return paths, filesSize(paths), err
	}
	before := l.cfg.Mirror.Written()
	if rewrite {
		paths, err = l.cfg.Mirror.Rewrite(batch...)
	} else {
		paths, err = l.cfg.Mirror.Write(batch...)
	}
	return paths, l.cfg.Mirror.Written() - before, err
}

// writtenItems returns the items of batch whose files are among paths.
// The mirror writes in batch order and returns the paths it wrote in
// that order, so paths is a subsequence of batch, matched by tag.
func writtenItems(batch []Item, paths []string) []Item {
	var out []Item
	j := 0
	for _, it := range batch {
		if j == len(paths) {
			break
		}
		if tag, ok := TagOf(filepath.Base(paths[j])); ok && tag == Tag(it.Env.ID.String()) {
			out = append(out, it)
			j++
		}
	}
	return out
}
