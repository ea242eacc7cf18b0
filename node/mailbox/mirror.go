package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// ErrDiskFull is wrapped by write errors caused by a full disk or an
// exhausted quota. Nothing is lost when the mirror fails: every envelope
// is already in the history store before it is mirrored. The caller logs
// the error and counts it; once space is freed, later batches are written
// again. The files that failed are not retried.
var ErrDiskFull = errors.New("disk full")

// Config configures a [Mirror]. Start from [DefaultConfig]: the zero
// value turns fsync off.
type Config struct {
	// SyncFiles fsyncs each file before it is renamed into place, and the
	// directories after: a file under its final name then survives a power
	// loss. Default true. A writer whose items are durable elsewhere (meshd:
	// the history store) may turn it off, call [Mirror.Sync] now and then,
	// and after a power loss rewrite the files [Complete] rejects.
	SyncFiles bool
	// BatchDirSync fsyncs each directory once per [Mirror.Write], after all
	// its renames, instead of after each rename. Default true: a directory
	// fsync costs about as much as a file's, so doing one per file nearly
	// doubles the cost of a busy inbox. False exists to measure that.
	BatchDirSync bool
	// Logger receives the cleanup of temporary files; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the configuration meshd uses.
func DefaultConfig() Config {
	return Config{SyncFiles: true, BatchDirSync: true}
}

// Modes of what the mirror writes: the mailbox is for the agent to read,
// and the home directory (0700) keeps everyone else out.
const (
	fileMode = 0o644
	dirMode  = 0o755
)

// tempPrefix starts the name of every temporary file the package writes;
// readers skip names that start with ".".
const tempPrefix = ".tmp-"

// Mirror writes mirror files under a mailbox root. It is safe for
// concurrent use; writes are serialized.
type Mirror struct {
	dir string
	cfg Config
	log *slog.Logger

	// mu serializes Write: the choice of free names, the renames and the
	// index appends. It guards the fields below.
	mu sync.Mutex
	// inboxDirs are the inbox directories known to exist, so that a file
	// costs no stat of its directory.
	inboxDirs map[string]bool
	// index is the day index last appended to, kept open between batches.
	index *openIndex

	// write writes to a file; tests replace it to inject failures.
	write func(f *os.File, b []byte) (int, error)
	// now is the clock for items without a delivery time.
	now func() time.Time
}

// Open returns a mirror writing under dir, the mailbox root (created if
// needed), and removes the temporary files a crash left in its day
// directories.
func Open(dir string, cfg Config) (*Mirror, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	m := &Mirror{dir: dir, cfg: cfg, log: log, inboxDirs: map[string]bool{},
		write: func(f *os.File, b []byte) (int, error) { return f.Write(b) },
		now:   time.Now}
	n, err := removeTemps(dir)
	if n > 0 {
		log.Info("mailbox: removed temporary files left by an interrupted write", "count", n)
	}
	if err != nil {
		return nil, fmt.Errorf("mailbox: remove temporary files: %w", err)
	}
	return m, nil
}

// Dir returns the mailbox root.
func (m *Mirror) Dir() string { return m.dir }

// Close closes the index file the mirror keeps open. It is idempotent;
// a later Write opens what it needs again.
func (m *Mirror) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropIndexLocked()
}

// removeTemps removes ".tmp-*" files in dir's day and inbox directories.
func removeTemps(dir string) (int, error) {
	days, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, d := range days {
		if !d.IsDir() || !isDay(d.Name()) {
			continue
		}
		for _, sub := range []string{filepath.Join(dir, d.Name()), filepath.Join(dir, d.Name(), "inbox")} {
			k, err := removeTempsIn(sub)
			n += k
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

func removeTempsIn(dir string) (int, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), tempPrefix) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// isDay reports whether name looks like a day directory, YYYY-MM-DD.
func isDay(name string) bool {
	_, err := time.Parse(time.DateOnly, name)
	return err == nil
}

// Write writes one mirror file per item, as one batch (see the package
// documentation), and returns the paths written. An item that fails does
// not stop the others: the error joins every failure, and the paths are
// those of the files written. Failures caused by a full disk wrap
// [ErrDiskFull].
func (m *Mirror) Write(items ...Item) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		paths []string
		errs  []error
		dirs  dirSet // to fsync at the end of the batch
		idx   = map[string]*bytes.Buffer{}
		days  []string // the keys of idx, in order
	)
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
			day := p.when.Format(time.DateOnly)
			b, ok := idx[day]
			if !ok {
				b = new(bytes.Buffer)
				idx[day] = b
				days = append(days, day)
			}
			b.WriteString(indexLine(p.when, p.it.Priority, p.hs, filepath.Join("inbox", filepath.Base(path)), p.body))
		}
	}
	if m.cfg.SyncFiles {
		for _, d := range dirs.list {
			if err := syncDir(d); err != nil {
				errs = append(errs, wrapFS("fsync directory", err))
			}
		}
	}
	for _, day := range days {
		if err := m.appendIndexLocked(day, idx[day].Bytes()); err != nil {
			errs = append(errs, err)
		}
	}
	return paths, errors.Join(errs...)
}

// Sync makes every file and index line written so far durable, with one
// syncfs(2) of the file system that holds the mailbox: one journal commit
// however many files were written since the last call.
func (m *Mirror) Sync() error {
	d, err := os.Open(m.dir)
	if err != nil {
		return wrapFS("sync", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return wrapFS("syncfs "+m.dir, err)
	}
	return nil
}

// Complete reports whether the mirror file at path is whole: not empty
// and ending with the armored envelope's last line. A file written
// without fsync and cut by a power loss fails this check (ext4 can keep
// the rename and lose the data); a file that passes holds its envelope.
func Complete(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	tail := int64(len(ArmorEnd) + 2)
	if fi.Size() < tail {
		return false, nil
	}
	buf := make([]byte, tail)
	if _, err := f.ReadAt(buf, fi.Size()-tail); err != nil {
		return false, err
	}
	return bytes.HasSuffix(bytes.TrimRight(buf, "\r\n"), []byte(ArmorEnd)), nil
}

// chunkSize bounds the temporary files a batch holds open at once.
const chunkSize = 64

// maxSyncers bounds the concurrent fsyncs of a batch.
const maxSyncers = 16

// pending is a mirror file written to its temporary file, not yet in
// place.
type pending struct {
	it   Item
	when time.Time // delivery time, UTC
	hs   []header
	body string
	dir  string   // its inbox directory
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
// directory. m.mu must be held.
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
	dayDir := filepath.Join(m.dir, p.when.Format(time.DateOnly))
	p.dir = filepath.Join(dayDir, "inbox")
	known := m.inboxDirs[p.dir]
	if !known {
		if err := m.ensureDirLocked(dayDir, p.dir, dirs); err != nil {
			return nil, err
		}
	}
	f, err := os.CreateTemp(p.dir, tempPrefix+"*")
	if err != nil && known && errors.Is(err, fs.ErrNotExist) {
		// Someone removed the directory since: make it again.
		delete(m.inboxDirs, p.dir)
		if err := m.ensureDirLocked(dayDir, p.dir, dirs); err != nil {
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
	// CreateTemp makes 0600, and the umask may narrow OpenFile's mode.
	if err = f.Chmod(fileMode); err != nil {
		return nil, wrapFS("write "+f.Name(), err)
	}
	if _, err = m.write(f, data); err != nil {
		return nil, wrapFS("write "+f.Name(), err)
	}
	p.f = f
	return p, nil
}

// ensureDirLocked creates the inbox directory dir (in the day directory
// dayDir) if it is missing and remembers that it exists.
func (m *Mirror) ensureDirLocked(dayDir, dir string, dirs *dirSet) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return wrapFS("create "+dir, err)
		}
		// The new directories' entries must reach the disk too.
		dirs.add(m.dir)
		dirs.add(dayDir)
	}
	if len(m.inboxDirs) >= 8 {
		clear(m.inboxDirs) // one entry a day; keep it small
	}
	m.inboxDirs[dir] = true
	return nil
}

// syncAll fsyncs the temporary files concurrently: the file system
// commits concurrent fsyncs together, which costs much less than one
// commit per file.
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

// publishLocked renames a staged file into place under a free name and
// returns its path. m.mu must be held.
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
		id := p.it.Env.ID.String()
		path, err = renameFree(tmp, p.dir, p.when.Format("150405")+"-"+id[len(id)-12:], ".txt")
	}
	if err != nil {
		os.Remove(tmp)
		return "", wrapFS("write "+tmp, err)
	}
	if m.cfg.SyncFiles {
		if m.cfg.BatchDirSync {
			dirs.add(p.dir)
		} else if err := syncDir(p.dir); err != nil {
			return "", wrapFS("fsync directory", err)
		}
	}
	return path, nil
}

// renameFree renames tmp to dir/base+ext, or with "-2", "-3", ... after
// base if that is taken, and returns the new path. It never replaces a
// file: renameat2 with RENAME_NOREPLACE checks and renames in one call.
// Where that is not supported it falls back to a free name and rename.
func renameFree(tmp, dir, base, ext string) (string, error) {
	for n := 1; ; n++ {
		name := base + ext
		if n > 1 {
			name = fmt.Sprintf("%s-%d%s", base, n, ext)
		}
		p := filepath.Join(dir, name)
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p, unix.RENAME_NOREPLACE)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, unix.EEXIST):
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
			p, err := freeName(dir, base, ext, "")
			if err != nil {
				return "", err
			}
			return p, os.Rename(tmp, p)
		default:
			return "", &os.LinkError{Op: "rename", Old: tmp, New: p, Err: err}
		}
	}
}

// freeName returns dir/base+ext, or with "-2", "-3", ... after base if
// that is taken. With a sidecar suffix, the name plus that suffix must be
// free too.
func freeName(dir, base, ext, sidecar string) (string, error) {
	for n := 1; ; n++ {
		name := base + ext
		if n > 1 {
			name = fmt.Sprintf("%s-%d%s", base, n, ext)
		}
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

// indexLine returns the index line of one file.
func indexLine(when time.Time, prio string, hs []header, rel, body string) string {
	var from, to, kind string
	for _, h := range hs {
		switch h.name {
		case "From":
			from = h.value
		case "To":
			to = h.value
		case "Kind":
			kind = h.value
		}
	}
	if prio == "" {
		prio = "-"
	}
	return strings.Join([]string{when.Format(time.TimeOnly), prio, kind, from, to, rel, summary(body)}, "\t") + "\n"
}

// summaryLen is how many characters of the body the index shows.
const summaryLen = 80

// summary returns the index summary of a body: each run of spaces and
// control characters becomes one space, then the first [summaryLen]
// characters, without a trailing space. Bytes that are not UTF-8 become
// "?".
func summary(body string) string {
	var b strings.Builder
	n := 0
	space := false
	for i, r := range body {
		if n == summaryLen {
			break
		}
		if r == ' ' || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
			if n == summaryLen {
				break
			}
		}
		if r == utf8.RuneError && isInvalidAt(body, i) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// openIndex is a day's index file kept open for appending.
type openIndex struct {
	path string
	f    *os.File
	fi   os.FileInfo // f's identity, to notice an index removed or replaced
}

// dropIndexLocked closes the index kept open, if any.
func (m *Mirror) dropIndexLocked() error {
	if m.index == nil {
		return nil
	}
	err := m.index.f.Close()
	m.index = nil
	return err
}

// appendIndexLocked appends lines to the day's index (and fsyncs it when
// the configuration says so). The index last appended to stays open: a
// batch then costs a stat, to notice the file removed or replaced by
// hand, and a write.
func (m *Mirror) appendIndexLocked(day string, lines []byte) error {
	path := filepath.Join(m.dir, day, "index.txt")
	if ix := m.index; ix != nil && ix.path == path {
		if fi, err := os.Stat(path); err == nil && os.SameFile(fi, ix.fi) {
			return m.appendOpenIndexLocked(lines, false)
		}
	}
	if err := m.dropIndexLocked(); err != nil {
		m.log.Warn("mailbox: close index", "err", err)
	}
	created, err := notExist(path)
	if err != nil {
		return wrapFS("index", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return wrapFS("index", err)
	}
	if created {
		if err := f.Chmod(fileMode); err != nil {
			f.Close()
			return wrapFS("index", err)
		}
	} else if torn, err := endsTorn(f); err != nil {
		f.Close()
		return wrapFS("index", err)
	} else if torn {
		// A crash cut the last line short: end it, so lines stay lines.
		lines = append([]byte("\n"), lines...)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return wrapFS("index", err)
	}
	m.index = &openIndex{path: path, f: f, fi: fi}
	return m.appendOpenIndexLocked(lines, created)
}

// appendOpenIndexLocked writes lines to the open index. After a failed
// write the file is closed, so the next batch reopens it and ends a line
// the failure cut short.
func (m *Mirror) appendOpenIndexLocked(lines []byte, created bool) error {
	ix := m.index
	if _, err := m.write(ix.f, lines); err != nil {
		m.dropIndexLocked()
		return wrapFS("index "+ix.path, err)
	}
	if m.cfg.SyncFiles {
		if err := ix.f.Sync(); err != nil {
			m.dropIndexLocked()
			return wrapFS("index "+ix.path+": fsync", err)
		}
		if created {
			if err := syncDir(filepath.Dir(ix.path)); err != nil {
				return wrapFS("fsync directory", err)
			}
		}
	}
	return nil
}

// endsTorn reports whether f is not empty and does not end in "\n".
func endsTorn(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return last[0] != '\n', nil
}

// syncDir makes the renames and creations in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// wrapFS wraps a file-system error, adding [ErrDiskFull] when the disk or
// the quota is full.
func wrapFS(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("mailbox: %s: %w: %w", op, ErrDiskFull, err)
	}
	return fmt.Errorf("mailbox: %s: %w", op, err)
}
