package mailbox

import (
	"os"
	"sync"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
)

// The mailbox's own limits (docs/SECURITY.md "The mailbox"): the mirror
// writes while the inbox files number fewer than MaxFiles and take fewer
// than MaxBytes, and the file system holding them has at least MinFree
// bytes free. Past any, it pauses: the batch is held back like one a full
// disk refused (the envelopes are in the store), a warning is logged
// once, the pause counted (Host.Paused) and `meshctl status` shows it.
// Its retries count the files again (an agent may have removed some,
// retention removes those of pruned envelopes) and, once there is room,
// it resumes and writes what it missed from the store. Retention removes
// the file of every envelope it prunes ([Loop.RemovePruned]).

// Pause reasons, as counted (mirror.paused.<reason>) and shown by status.
const (
	PauseFiles = "files"
	PauseBytes = "bytes"
	PauseFree  = "free_space"
)

// pauseRetry is how often a paused mirror looks for room again.
const pauseRetry = 2 * time.Second

// gate counts the mailbox's files and decides whether the mirror may
// write. It is safe for concurrent use: the mirror loop writes, the
// retention goroutine removes.
type gate struct {
	root      string
	maxFiles  int   // ≤ 0 no limit
	maxBytes  int64 // ≤ 0 no limit
	minFree   int64 // ≤ 0 no limit
	diskSpace func(string) (uint64, uint64, error)

	mu     sync.Mutex
	files  int
	bytes  int64
	free   int64 // at the last check; -1 unknown
	reason string
	since  time.Time
}

func newGate(c LoopConfig) *gate {
	return &gate{root: c.Root, maxFiles: c.MaxFiles, maxBytes: c.MaxBytes, minFree: c.MinFree, diskSpace: c.DiskSpace, free: -1}
}

// recount counts the files on disk again.
func (g *gate) recount() error {
	files, bytes, err := Usage(g.root)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.files, g.bytes = files, bytes
	g.mu.Unlock()
	return nil
}

// check returns why the mirror may not write now, or "" if it may. It
// reads the free space of the mailbox's file system each time.
func (g *gate) check() string {
	free := int64(-1)
	if g.minFree > 0 && g.diskSpace != nil {
		if f, _, err := g.diskSpace(g.root); err == nil {
			free = int64(f)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free = free
	switch {
	case g.maxFiles > 0 && g.files >= g.maxFiles:
		return PauseFiles
	case g.maxBytes > 0 && g.bytes >= g.maxBytes:
		return PauseBytes
	case g.minFree > 0 && free >= 0 && free < g.minFree:
		return PauseFree
	}
	return ""
}

// wrote counts files written, with their sizes.
func (g *gate) wrote(files int, bytes int64) {
	g.mu.Lock()
	g.files += files
	g.bytes += bytes
	g.mu.Unlock()
}

// removed counts files removed.
func (g *gate) removed(files int, bytes int64) {
	g.mu.Lock()
	g.files = max(0, g.files-files)
	g.bytes = max(0, g.bytes-bytes)
	g.mu.Unlock()
}

// setPaused records the pause reason ("" running) and reports whether it
// changed.
func (g *gate) setPaused(reason string, now time.Time) (changed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reason == reason {
		return false
	}
	g.reason, g.since = reason, now
	return true
}

// paused reports whether the gate holds the mirror back.
func (g *gate) paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason != ""
}

// Status is the mailbox's count, limits and pause, for `meshctl status`.
// It is safe to call from any goroutine.
func (l *Loop) Status() *api.MailboxStatus {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &api.MailboxStatus{Files: g.files, Bytes: g.bytes, MaxFiles: g.maxFiles, MaxBytes: g.maxBytes,
		MinFreeBytes: g.minFree, FreeBytes: g.free, Paused: g.reason}
	if g.reason != "" {
		s.PausedSince = g.since.UTC()
	}
	return s
}

// onPause logs and counts a change of the gate's state.
func (l *Loop) onPause(reason string) {
	if !l.g.setPaused(reason, time.Now()) {
		return
	}
	st := l.Status()
	if reason == "" {
		l.cfg.Logger.Info("mailbox mirror resumed: there is room again; writing the files it held back",
			"files", st.Files, "bytes", st.Bytes, "free_bytes", st.FreeBytes)
		return
	}
	l.cfg.Host.Paused(reason)
	l.cfg.Logger.Warn("mailbox mirror paused: "+pauseText(reason)+"; the envelopes stay in the store and their files are written once there is room",
		"reason", reason, "files", st.Files, "max_files", st.MaxFiles, "bytes", st.Bytes, "max_bytes", st.MaxBytes,
		"free_bytes", st.FreeBytes, "min_free_bytes", st.MinFreeBytes)
}

func pauseText(reason string) string {
	switch reason {
	case PauseFiles:
		return "the mailbox holds mailbox_max_files files"
	case PauseBytes:
		return "the mailbox holds mailbox_max_mib"
	}
	return "free disk space is below mailbox_min_free_mib"
}

// holdBack records files not written because the mirror is paused: the
// retries write them from the store once there is room, as after a
// failed write.
func (l *Loop) holdBack(files int, oldest time.Time) {
	l.failures++
	l.cfg.Host.Count(CountHeldBack, uint64(files))
	if l.failedSince.IsZero() || oldest.Before(l.failedSince) {
		l.failedSince = oldest
	}
	l.missed += files
	if !l.failing {
		l.failing = true
		l.backoff = retryMin
	}
	if !l.armed {
		l.arm(pauseRetry)
	}
}

// RemovePruned removes the mailbox files of the items retention removed
// (history.Config.InboxPruned). A file not found is already gone. It is
// safe to call from any goroutine.
func (l *Loop) RemovePruned(items []history.PrunedItem) {
	root := l.cfg.Root
	files := newFileFinder(root)
	sent := &fileFinder{root: root, folders: files.folders, in: []string{FolderSent}}
	removed, failed, bytes := 0, 0, int64(0)
	var firstErr error
	for _, it := range items {
		// The file whose From-Key is the sender's: another sender's
		// envelope may share the id, and so the file's tag.
		p := files.pathFrom(it.ID, it.From, it.Delivered)
		if it.Sent {
			p = sent.pathFrom(it.ID, it.From, it.Delivered)
		}
		if p == "" {
			continue // never written, or removed already
		}
		size, err := RemoveFile(root, p)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		removed++
		bytes += size
	}
	if failed > 0 {
		// One line per pruning step, however many files failed.
		l.cfg.Host.Count(CountPruneFailed, uint64(failed))
		l.cfg.Logger.Warn("mailbox: cannot remove the files of pruned envelopes", "files", failed, "err", firstErr)
	}
	if removed > 0 {
		l.g.removed(removed, bytes)
		l.cfg.Host.Count(CountPruned, uint64(removed))
	}
}

// filesSize is the total size of the files at paths.
func filesSize(paths []string) int64 {
	var sum int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			sum += fi.Size()
		}
	}
	return sum
}
