package mailbox

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// reconcile writes the mailbox files of inbox items delivered since since
// that have none: a crash between the store commit and the mirror write,
// or a full disk, loses no file. At start, files of items delivered
// after the last checkpoint were written without fsync, so a power loss
// may have left them empty or cut short under their final names: those
// are read, and rewritten unless whole; and the index lines a crash kept
// from their day's index are appended. It returns the items whose files
// it tried to write and, of those, the ones it wrote (a failure is
// counted in l.failures). It checkpoints only when every write worked.
func (l *Loop) reconcile(since time.Time, atStart bool) (tried, written []Item) {
	st, sw := l.reconcileSent(since)
	it, iw := l.reconcileInbox(since, atStart)
	return append(st, it...), append(sw, iw...)
}

// reconcileInbox is reconcile for the inbox items' files.
func (l *Loop) reconcileInbox(since time.Time, atStart bool) (tried, written []Item) {
	h, log := l.cfg.Host, l.cfg.Logger
	before := l.failures
	items, err := h.Inbox(since)
	if err != nil {
		log.Error("mailbox reconcile", "err", err)
		l.failures++
		return
	}
	checkFrom := ReadCheckpoint(l.cfg.Root).Add(-checkMargin)
	if !atStart {
		// Files written in this run are whole unless a write failed, and
		// a failed write leaves no file.
		checkFrom = time.Now()
	}
	var missing, torn, recent []Item
	var recentPaths []string
	files := newFileFinder(l.cfg.Root)
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
			if ok, err := Complete(path); err == nil && !ok {
				log.Warn("mailbox: rewriting a file cut short by a crash", "path", path)
				if err := os.Remove(path); err != nil {
					log.Error("mailbox reconcile: remove torn file", "path", path, "err", err)
					continue
				}
				path, cut = "", true
			}
		}
		if path != "" && it.Read && folderOfPath(path) == FolderInbox {
			// Read while the mirror was stopped, or its move failed.
			l.move(path)
		}
		recheck := path != "" && it.Delivered.After(checkFrom)
		if path != "" && !recheck {
			continue
		}
		se, err := h.Envelope(it.From, it.ID)
		if err != nil {
			continue
		}
		mi := h.InboxItem(se, it.Priority, it.FromHistory, it.Delivered)
		if it.Read {
			mi.Folder = FolderRead
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
		added, err := l.cfg.Mirror.Reindex(recent, recentPaths)
		if err != nil {
			log.Error("mailbox reconcile: index lines", "err", err)
		}
		if added > 0 {
			log.Info("mailbox: index lines missing since the last run appended", "count", added)
			h.Count(CountReindexed, uint64(added))
		}
	}
	if len(missing)+len(torn) == 0 {
		if !newest.IsZero() && atStart {
			// Every file checked is whole: record it, so the next start
			// reads only what comes after.
			l.checkpoint(newest)
		}
		return
	}
	if atStart {
		log.Info("mailbox: writing files missing since the last run", "count", len(missing)+len(torn), "cut_short", len(torn))
	} else {
		log.Info("mailbox: writing files that failed", "count", len(missing))
	}
	h.Count(CountReconciled, uint64(len(missing)+len(torn)))
	h.Count(CountTornRewritten, uint64(len(torn)))
	// From the store: the queue's skip list does not apply.
	for i := 0; i < len(missing); i += 256 {
		_, w := l.put(missing[i:min(i+256, len(missing))], false)
		written = append(written, w...)
	}
	// A file cut short may be in its day's index already.
	for i := 0; i < len(torn); i += 256 {
		_, w := l.put(torn[i:min(i+256, len(torn))], true)
		written = append(written, w...)
	}
	if l.failures == before {
		l.checkpoint(newest)
	}
	return append(missing, torn...), written
}

// reconcileSent writes the sent-folder files of what this node sent since
// since that have none: a crash between the send and the file, a full
// disk, or a paused mirror loses no file. It reads the delivery records
// (one per sent envelope and recipient) and each day's sent folder once.
func (l *Loop) reconcileSent(since time.Time) (tried, written []Item) {
	h := l.cfg.Host
	rs, err := h.Sent()
	if err != nil {
		l.cfg.Logger.Error("mailbox reconcile: sent messages", "err", err)
		l.failures++
		return nil, nil
	}
	files := newFileFinder(l.cfg.Root, FolderSent)
	seen := map[uuid.UUID]bool{}
	var missing []Item
	for _, rec := range rs {
		if rec.Sent.Before(since) {
			break // newest first
		}
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		if files.path(rec.ID, rec.Sent) != "" {
			continue
		}
		se, err := h.Envelope(l.cfg.Self, rec.ID)
		if err != nil {
			continue // sent before this node kept its own DMs, or pruned
		}
		missing = append(missing, h.SentItem(se))
	}
	if len(missing) == 0 {
		return nil, nil
	}
	l.cfg.Logger.Info("mailbox: writing the files of sent messages that have none", "count", len(missing))
	h.Count(CountReconciledSent, uint64(len(missing)))
	for i := 0; i < len(missing); i += 256 {
		_, w := l.put(missing[i:min(i+256, len(missing))], false)
		written = append(written, w...)
	}
	return missing, written
}

// fileFinder finds the mailbox files of envelopes. It reads each folder
// once and remembers its files by envelope tag, so a start that checks
// thousands of items reads each day's folder once, not once per item.
type fileFinder struct {
	root    string
	folders map[string]map[string][]string // folder → tag → paths, by name
	// in are the day folders looked in.
	in []string
}

// newFileFinder finds files in the day folders in of root; none: inbox
// and read.
func newFileFinder(root string, in ...string) *fileFinder {
	if len(in) == 0 {
		in = []string{FolderInbox, FolderRead}
	}
	return &fileFinder{root: root, folders: map[string]map[string][]string{}, in: in}
}

// path returns id's file in the folders of the days around its delivery;
// "" when there is none. Of several (a tag shared within a second), the
// first by name.
func (f *fileFinder) path(id uuid.UUID, at time.Time) string {
	if ps := f.paths(id, at); len(ps) > 0 {
		return ps[0]
	}
	return ""
}

// paths returns the files with id's tag in the folders of the days
// around its delivery, by day and then by name.
func (f *fileFinder) paths(id uuid.UUID, at time.Time) []string {
	tag := Tag(id.String())
	var out []string
	for _, d := range []time.Time{at.Add(-24 * time.Hour), at, at.Add(24 * time.Hour)} {
		for _, folder := range f.in {
			dir := filepath.Join(f.root, d.UTC().Format(time.DateOnly), folder)
			files, ok := f.folders[dir]
			if !ok {
				files = map[string][]string{}
				ents, _ := os.ReadDir(dir) // sorted by name; a missing folder holds nothing
				for _, e := range ents {
					if t, ok := TagOf(e.Name()); ok {
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
func (f *fileFinder) pathFrom(id uuid.UUID, from proto.PubKey, at time.Time) string {
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

// folderOfPath is the folder of a mirror file path.
func folderOfPath(p string) string { return filepath.Base(filepath.Dir(p)) }
