package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
)

// Write writes one mirror file per item, as one batch (see the package
// documentation), and returns the paths written. An item that fails does
// not stop the others: the error joins every failure, and the paths are
// those of the files written. Failures caused by a full disk wrap
// [ErrDiskFull].
func (m *Mirror) Write(items ...Item) ([]string, error) { return m.writeItems(items, false) }

// Rewrite writes the files of items again, as [Mirror.Write] does, where a
// power loss left them cut short and the caller removed them. Their day's
// index may list them already, under the names they get again, so it
// appends only the index lines the index lacks: no file is listed twice.
func (m *Mirror) Rewrite(items ...Item) ([]string, error) { return m.writeItems(items, true) }

// Written returns the bytes of the files [Mirror.Write] and
// [Mirror.Rewrite] have put in place since the mirror opened: their sizes
// as written, so a caller counting what a Write added needs no stat of
// each file.
func (m *Mirror) Written() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written
}

func (m *Mirror) writeItems(items []Item, rewrite bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		paths  []string
		errs   []error
		dirs   dirSet // to fsync at the end of the batch
		lines  indexLines
		listed map[string]map[string]bool // on a rewrite, the names each day's index lists
	)
	if rewrite {
		listed = map[string]map[string]bool{}
	}
	for len(items) > 0 {
		chunk := items[:min(len(items), chunkSize)]
		items = items[len(chunk):]
		ps := make([]*pending, 0, len(chunk))
		for _, it := range chunk {
			p, err := m.stageLocked(it, &dirs)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ps = append(ps, p)
		}
		if m.cfg.SyncFiles {
			syncAll(ps)
		}
		for _, p := range ps {
			path, err := m.publishLocked(p, &dirs)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			paths = append(paths, path)
			m.written += p.size
			name := filepath.Base(path)
			if rewrite {
				names, err := m.listedLocked(listed, p.day)
				if err != nil {
					errs = append(errs, err)
				}
				if names == nil || names[folderOf(p.it)+"/"+name] {
					continue // the day's index unreadable, or the line there
				}
				names[folderOf(p.it)+"/"+name] = true
			}
			b := lines.of(p.day)
			b.Write(appendIndexLine(b.AvailableBuffer(), p.when, p.it.Priority, p.hs, folderOf(p.it)+"/"+name, p.body))
		}
	}
	if m.cfg.SyncFiles {
		for _, d := range dirs.list {
			if err := fsutil.SyncDir(d); err != nil {
				errs = append(errs, wrapFS("fsync directory", err))
			}
		}
	} else if m.sys.syncfs == nil {
		for _, p := range paths {
			m.unsynced.add(p)
		}
		for _, d := range dirs.list {
			m.unsynced.add(d)
		}
	}
	_, err := m.appendLinesLocked(&lines)
	return paths, errors.Join(append(errs, err)...)
}

// chunkSize bounds the files a batch holds open at once.
const chunkSize = 64

// maxSyncers bounds the concurrent fsyncs of a batch.
const maxSyncers = 16

// pending is a mirror file written to a temporary file, open and not yet
// in place.
type pending struct {
	it   Item
	when time.Time // delivery time, UTC
	day  string    // its day, YYYY-MM-DD
	hs   []header
	body string
	dir  string   // its inbox directory
	size int64    // the file's bytes
	f    *os.File // the temporary file, open
	err  error    // of the fsync
}

// dirSet is an ordered set of directories.
type dirSet struct {
	list []string
	seen map[string]bool
}

func (s *dirSet) add(d string) {
	if s.seen[d] {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[d] = true
	s.list = append(s.list, d)
}

// stageLocked renders it and writes it to a temporary file in its inbox
// directory, which it creates if it is missing. m.mu must be held.
func (m *Mirror) stageLocked(it Item, dirs *dirSet) (p *pending, err error) {
	p = &pending{it: it, when: it.Delivered}
	if p.when.IsZero() {
		p.when = m.now()
	}
	p.when = p.when.UTC()
	if p.hs, p.body, err = render(it); err != nil {
		return nil, err
	}
	data := assemble(p.hs, p.body, it.Env.Raw)
	dp := m.dayLocked(p.when)
	p.day, p.dir = dp.day, filepath.Join(dp.dayDir, folderOf(it))
	f, err := os.CreateTemp(p.dir, tempPrefix+"*")
	if errors.Is(err, fs.ErrNotExist) {
		// A new day, or someone removed the directory: make it.
		if err := m.mkdirLocked(dp.dayDir, p.dir, dirs); err != nil {
			return nil, err
		}
		f, err = os.CreateTemp(p.dir, tempPrefix+"*")
	}
	if err != nil {
		return nil, wrapFS("write "+p.dir, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes 0600; a group that may read the mailbox gets 0640.
	if m.cfg.Access.Shared() {
		if err = f.Chmod(m.cfg.Access.fileMode()); err != nil {
			return nil, wrapFS("write "+f.Name(), err)
		}
	}
	if _, err = m.write(f, data); err != nil {
		return nil, wrapFS("write "+f.Name(), err)
	}
	p.f, p.size = f, int64(len(data))
	return p, nil
}

// mkdirLocked creates a day directory and one of its folders where they
// are missing, with the mode and group of the configured access, and
// notes the directories whose entries changed, to fsync.
func (m *Mirror) mkdirLocked(dayDir, folder string, dirs *dirSet) error {
	for _, d := range []string{dayDir, folder} {
		made, err := m.cfg.Access.mkdir(d)
		if err != nil {
			return wrapFS("create "+d, err)
		}
		if made {
			dirs.add(filepath.Dir(d))
			dirs.add(d)
		}
	}
	return nil
}

// dayPaths are the names of one UTC day's directories.
type dayPaths struct {
	y      int
	m      time.Month
	d      int
	day    string // YYYY-MM-DD
	dayDir string // <root>/<day>
	inbox  string // <root>/<day>/inbox
}

// dayLocked returns the paths of t's day (t in UTC). They are kept for the
// next file, which almost always falls on the same day, so they are built
// once a day rather than once a file. m.mu must be held.
func (m *Mirror) dayLocked(t time.Time) dayPaths {
	y, mo, d := t.Date()
	if m.day.day == "" || m.day.y != y || m.day.m != mo || m.day.d != d {
		day := t.Format(time.DateOnly)
		dayDir := filepath.Join(m.dir, day)
		m.day = dayPaths{y: y, m: mo, d: d, day: day, dayDir: dayDir, inbox: filepath.Join(dayDir, "inbox")}
	}
	return m.day
}

// syncAll fsyncs the staged files concurrently: the file system commits
// concurrent fsyncs together, which costs much less than one commit per
// file.
func syncAll(ps []*pending) {
	if len(ps) == 1 {
		ps[0].err = ps[0].f.Sync()
		return
	}
	next := make(chan *pending)
	var wg sync.WaitGroup
	for range min(len(ps), maxSyncers) {
		wg.Go(func() {
			for p := range next {
				p.err = p.f.Sync()
			}
		})
	}
	for _, p := range ps {
		next <- p
	}
	close(next)
	wg.Wait()
}

// publishLocked closes p's temporary file and renames it into place under
// a free name, and returns its path. m.mu must be held.
func (m *Mirror) publishLocked(p *pending, dirs *dirSet) (string, error) {
	tmp := p.f.Name()
	err := p.err
	if err != nil {
		err = fmt.Errorf("fsync: %w", err)
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	var path string
	if err == nil {
		path, err = m.renameFree(tmp, p.dir, nameBase(p.when, p.it.Env.ID.String()), ".txt")
	}
	if err != nil {
		os.Remove(tmp)
		return "", wrapFS("write "+tmp, err)
	}
	// Each directory is fsynced once per Write, after all its renames: a
	// directory fsync costs about as much as a file's, so one per file
	// would nearly double the cost of a busy inbox (BenchmarkMirror's
	// "perfile" case, a Write per file, measures that).
	dirs.add(p.dir)
	return path, nil
}

// renameFree renames tmp to dir/base+ext, or with "-2", "-3", ... after
// base if that is taken, and returns the new path. It never replaces a
// file.
func (m *Mirror) renameFree(tmp, dir, base, ext string) (string, error) {
	for n := 1; ; n++ {
		p := filepath.Join(dir, numberedName(base, ext, n))
		err := m.sys.rename(tmp, p)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, fs.ErrExist):
			continue
		default:
			return "", err
		}
	}
}

// linkRename renames old to new without replacing a file: a hard link,
// which fails if new exists, then the removal of old. Where the file
// system has no hard links it checks that new is free and renames: the
// mirror is the only writer of its directories.
func linkRename(old, new string) error {
	err := os.Link(old, new)
	if err == nil {
		if err := os.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	free, serr := notExist(new)
	if serr != nil {
		return serr
	}
	if !free {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: fs.ErrExist}
	}
	return os.Rename(old, new)
}

// freeName returns dir/base+ext, or with "-2", "-3", ... after base if
// that is taken. With a sidecar suffix, the name plus that suffix must be
// free too.
func freeName(dir, base, ext, sidecar string) (string, error) {
	for n := 1; ; n++ {
		name := numberedName(base, ext, n)
		p := filepath.Join(dir, name)
		free, err := notExist(p)
		if err != nil {
			return "", err
		}
		if free && sidecar != "" {
			if free, err = notExist(p + sidecar); err != nil {
				return "", err
			}
		}
		if free {
			return p, nil
		}
	}
}

func notExist(p string) (bool, error) {
	_, err := os.Lstat(p)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	}
	return false, err
}
