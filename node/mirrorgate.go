package node

import (
	"os"
	"sync"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
)

// The counters counted in this file.
var (
	famMirrorPruned = newFamily("meshd_mirror_files_pruned_total", "Mailbox files removed because retention removed their envelope.")
	famMirrorHeld   = newFamily("meshd_mirror_files_held_back_total", "Mailbox files held back while the mirror was paused; written from the store once there is room.")

	cMirrorPruneFailed = newCounter("mirror.prune_failed", famMirrorFailures, "prune")
	cMirrorPruned      = newCounter("mirror.pruned", famMirrorPruned)
	cMirrorHeldBack    = newCounter("mirror.held_back", famMirrorHeld)
)

// The mailbox's own limits (docs/SECURITY.md "The mailbox"): the mirror
// writes while the inbox files number fewer than MailboxMaxFiles and take
// fewer than MailboxMaxBytes, and the file system holding them has at
// least MailboxMinFree bytes free. Past any, it pauses: the batch is held
// back like one a full disk refused (the envelopes are in the store), a
// warning is logged once, mirror.paused.<reason> counted and `meshctl
// status` shows it. Its retries count the files again (an agent may
// have removed some, retention removes those of pruned envelopes) and,
// once there is room, it resumes and writes what it missed from the
// store. Retention removes the file of every envelope it prunes.

// Pause reasons, as counted (mirror.paused.<reason>) and shown by status.
const (
	pauseFiles = "files"
	pauseBytes = "bytes"
	pauseFree  = "free_space"
)

// mirrorGate counts the mailbox's files and decides whether the mirror
// may write. It is safe for concurrent use: the mirror loop writes, the
// retention goroutine removes.
type mirrorGate struct {
	root     string
	maxFiles int   // ≤ 0 no limit
	maxBytes int64 // ≤ 0 no limit
	minFree  int64 // ≤ 0 no limit

	mu     sync.Mutex
	files  int
	bytes  int64
	free   int64 // at the last check; -1 unknown
	reason string
	since  time.Time
}

func newMirrorGate(root string, c *Config) *mirrorGate {
	return &mirrorGate{root: root, maxFiles: c.MailboxMaxFiles, maxBytes: c.MailboxMaxBytes, minFree: c.MailboxMinFree, free: -1}
}

// recount counts the files on disk again.
func (g *mirrorGate) recount() error {
	files, bytes, err := mailbox.Usage(g.root)
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
func (g *mirrorGate) check() string {
	free := int64(-1)
	if g.minFree > 0 {
		if f, _, err := diskSpace(g.root); err == nil {
			free = int64(f)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free = free
	switch {
	case g.maxFiles > 0 && g.files >= g.maxFiles:
		return pauseFiles
	case g.maxBytes > 0 && g.bytes >= g.maxBytes:
		return pauseBytes
	case g.minFree > 0 && free >= 0 && free < g.minFree:
		return pauseFree
	}
	return ""
}

// wrote counts files written, with their sizes.
func (g *mirrorGate) wrote(files int, bytes int64) {
	g.mu.Lock()
	g.files += files
	g.bytes += bytes
	g.mu.Unlock()
}

// removed counts files removed.
func (g *mirrorGate) removed(files int, bytes int64) {
	g.mu.Lock()
	g.files = max(0, g.files-files)
	g.bytes = max(0, g.bytes-bytes)
	g.mu.Unlock()
}

// setPaused records the pause reason ("" running) and reports whether it
// changed.
func (g *mirrorGate) setPaused(reason string, now time.Time) (changed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reason == reason {
		return false
	}
	g.reason, g.since = reason, now
	return true
}

// status is the gate's state for `meshctl status`.
func (g *mirrorGate) status() *api.MailboxStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &api.MailboxStatus{Files: g.files, Bytes: g.bytes, MaxFiles: g.maxFiles, MaxBytes: g.maxBytes,
		MinFreeBytes: g.minFree, FreeBytes: g.free, Paused: g.reason}
	if g.reason != "" {
		s.PausedSince = g.since.UTC()
	}
	return s
}

// onPaused logs and counts a change of the gate's state.
func (n *Node) onMirrorPause(reason string) {
	if !n.gate.setPaused(reason, time.Now()) {
		return
	}
	st := n.gate.status()
	if reason == "" {
		n.log.Info("mailbox mirror resumed: there is room again; writing the files it held back",
			"files", st.Files, "bytes", st.Bytes, "free_bytes", st.FreeBytes)
		return
	}
	n.metrics.Inc("mirror.paused." + reason)
	n.log.Warn("mailbox mirror paused: "+pauseText(reason)+"; the envelopes stay in the store and their files are written once there is room",
		"reason", reason, "files", st.Files, "max_files", st.MaxFiles, "bytes", st.Bytes, "max_bytes", st.MaxBytes,
		"free_bytes", st.FreeBytes, "min_free_bytes", st.MinFreeBytes)
}

func pauseText(reason string) string {
	switch reason {
	case pauseFiles:
		return "the mailbox holds mailbox_max_files files"
	case pauseBytes:
		return "the mailbox holds mailbox_max_mib"
	}
	return "free disk space is below mailbox_min_free_mib"
}

// removePrunedFiles removes the mailbox files of inbox items retention
// removed (history.Config.InboxPruned). A file not found is already gone.
func (n *Node) removePrunedFiles(items []history.PrunedItem) {
	root := n.home.MailboxDir()
	files := &mirrorFiles{root: root, folders: map[string]map[string][]string{}}
	removed, failed, bytes := 0, 0, int64(0)
	var firstErr error
	for _, it := range items {
		// The file whose From-Key is the sender's: another sender's
		// envelope may share the id, and so the file's tag.
		p := files.pathFrom(it.ID, it.From, it.Delivered)
		if it.Sent {
			p = files.sentPath(it)
		}
		if p == "" {
			continue // never written, or removed already
		}
		size, err := mailbox.RemoveFile(root, p)
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
		n.metrics.add(cMirrorPruneFailed, uint64(failed))
		n.log.Warn("mailbox: cannot remove the files of pruned envelopes", "files", failed, "err", firstErr)
	}
	if removed > 0 {
		n.gate.removed(removed, bytes)
		n.metrics.add(cMirrorPruned, uint64(removed))
	}
}

// mailboxStatus is the gate's state, or nil before the mailbox is open.
func (n *Node) mailboxStatus() *api.MailboxStatus {
	if n.gate == nil {
		return nil
	}
	return n.gate.status()
}

// mirrorPauseRetry is how often a paused mirror looks for room again.
const mirrorPauseRetry = 2 * time.Second

// paused reports whether the gate holds the mirror back.
func (g *mirrorGate) paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason != ""
}

// holdBack records files not written because the mirror is paused: the
// retries write them from the store once there is room, as after a
// failed write.
func (r *mirrorRun) holdBack(files int, oldest time.Time) {
	n := r.n
	r.failures++
	n.metrics.add(cMirrorHeldBack, uint64(files))
	if r.failedSince.IsZero() || oldest.Before(r.failedSince) {
		r.failedSince = oldest
	}
	r.missed += files
	if !r.failing {
		r.failing = true
		r.backoff = mirrorRetryMin
	}
	if !r.armed {
		r.arm(mirrorPauseRetry)
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
