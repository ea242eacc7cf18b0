package mailbox

import (
	"bufio"
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

	"github.com/meshd/meshd/internal/fsutil"
)

// ErrDiskFull is wrapped by write errors caused by a full disk or an
// exhausted quota. Nothing is lost when the mirror fails: every envelope
// is already in the history store before it is mirrored. The caller logs
// the error, counts it and writes the files again once space is freed.
var ErrDiskFull = errors.New("disk full")

// Config configures a [Mirror]. Start from [DefaultConfig]: the zero
// value turns fsync off.
type Config struct {
	// SyncFiles fsyncs each file before it is renamed into place, and the
	// directories after: a file under its final name then survives a
	// power loss. Default true. A writer whose items are durable elsewhere
	// (meshd: the history store) may turn it off, call [Mirror.Sync] now
	// and then, and after a power loss rewrite the files [Complete]
	// rejects.
	SyncFiles bool
	// Access says who may read the mailbox besides its owner; the zero
	// value is the owner alone.
	Access Access
	// Logger receives the cleanup of temporary files; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the configuration meshd uses.
func DefaultConfig() Config {
	return Config{SyncFiles: true}
}

// tempPrefix starts the name of every temporary file the package writes;
// readers skip names that start with ".".
const tempPrefix = fsutil.TempPrefix

// Mirror writes mirror files under a mailbox root. It is safe for
// concurrent use; writes are serialized.
type Mirror struct {
	dir string
	cfg Config
	log *slog.Logger
	sys sysOps

	// mu serializes Write: the choice of free names, the renames and the
	// index appends. It guards the fields below.
	mu sync.Mutex
	// index is the day index last appended to, kept open between batches.
	index *openIndex
	// day holds the paths of the day last written to (see dayLocked).
	day dayPaths
	// unsynced are the files and directories written since the last
	// [Mirror.Sync], where the system has no syncfs and Sync fsyncs each.
	unsynced dirSet

	// write writes to a file; tests replace it to inject failures.
	write func(f *os.File, b []byte) (int, error)
	// now is the clock for items without a delivery time.
	now func() time.Time
}

// sysOps are the calls whose best form depends on the system. Every
// system has the portable forms; Linux has faster ones (mirror_linux.go).
type sysOps struct {
	// rename renames old to new, failing with an error that wraps
	// [fs.ErrExist] if new exists: it never replaces a file.
	rename func(old, new string) error
	// syncfs makes every write to the file system that holds dir durable;
	// nil where the system has no such call, and [Mirror.Sync] then
	// fsyncs each file and directory written since the last one.
	syncfs func(dir string) error
}

// portableSys are the forms every system has: a link and an unlink to
// rename without replacing, and one fsync per file.
var portableSys = sysOps{rename: linkRename}

// defaultSys is what [Open] uses: nativeSys, or portableSys where a test
// forces the portable forms on Linux.
var defaultSys = nativeSys

// Open returns a mirror writing under dir, the mailbox root (created if
// needed, and given the mode and group cfg.Access asks for), and removes
// the temporary files a crash left in its day directories.
func Open(dir string, cfg Config) (*Mirror, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Access.mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	if n, err := cfg.Access.repairTree(dir, log); err != nil {
		return nil, fmt.Errorf("mailbox: set the modes (%s): %w", cfg.Access, err)
	} else if n > 0 {
		log.Info("mailbox: folders and their files given the mailbox's modes", "access", cfg.Access.String(), "folders", n)
	}
	m := &Mirror{dir: dir, cfg: cfg, log: log, sys: defaultSys,
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

// Close closes the index file the mirror keeps open. It is idempotent; a
// later Write opens it again.
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
		if !d.IsDir() || !IsDay(d.Name()) {
			continue
		}
		subs := []string{filepath.Join(dir, d.Name())}
		for _, f := range Folders {
			subs = append(subs, filepath.Join(dir, d.Name(), f))
		}
		for _, sub := range subs {
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

// indexLines are the index lines of a batch, by day.
type indexLines struct {
	byDay map[string]*bytes.Buffer
	days  []string // the keys of byDay, in order
}

// of returns the buffer of day's lines.
func (l *indexLines) of(day string) *bytes.Buffer {
	b, ok := l.byDay[day]
	if !ok {
		if l.byDay == nil {
			l.byDay = map[string]*bytes.Buffer{}
		}
		b = new(bytes.Buffer)
		l.byDay[day] = b
		l.days = append(l.days, day)
	}
	return b
}

// appendLinesLocked appends each day's lines to its index and returns
// how many lines it appended.
func (m *Mirror) appendLinesLocked(l *indexLines) (int, error) {
	var errs []error
	n := 0
	for _, day := range l.days {
		b := l.byDay[day].Bytes()
		if err := m.appendIndexLocked(day, b); err != nil {
			errs = append(errs, err)
			continue
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n, errors.Join(errs...)
}

// Reindex appends the index lines of files the day indexes do not list.
// Write renames a batch's files into place before it appends their
// lines, so a crash in between, or a power loss before the next
// [Mirror.Sync], can leave files that their day's index lacks. paths[i] is the file of items[i], in its
// day's inbox directory; the lines go to that day's index, after the lines
// already there. It returns how many lines it appended.
func (m *Mirror) Reindex(items []Item, paths []string) (int, error) {
	if len(items) != len(paths) {
		return 0, fmt.Errorf("mailbox: reindex %d items with %d paths", len(items), len(paths))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		listed = map[string]map[string]bool{} // day → file names its index lists
		lines  indexLines
		errs   []error
	)
	for i, it := range items {
		name := filepath.Base(filepath.Dir(paths[i])) + "/" + filepath.Base(paths[i])
		day := filepath.Base(filepath.Dir(filepath.Dir(paths[i])))
		names, err := m.listedLocked(listed, day)
		if err != nil {
			errs = append(errs, err)
		}
		if names == nil || names[name] {
			continue // the day's index unreadable, or the line there
		}
		hs, body, err := render(it)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		when := it.Delivered
		if when.IsZero() {
			when = m.now()
		}
		b := lines.of(day)
		b.Write(appendIndexLine(b.AvailableBuffer(), when.UTC(), it.Priority, hs, name, body))
		names[name] = true
	}
	added, err := m.appendLinesLocked(&lines)
	return added, errors.Join(append(errs, err)...)
}

// listedLocked returns the names day's index lists, read once per call
// of Rewrite or Reindex and kept in listed; nil (once, with the error) when
// the index cannot be read. m.mu must be held.
func (m *Mirror) listedLocked(listed map[string]map[string]bool, day string) (map[string]bool, error) {
	if names, ok := listed[day]; ok {
		return names, nil
	}
	names, err := m.indexed(day)
	listed[day] = names
	return names, err
}

// indexed returns the files that day's index lists, as "inbox/NAME",
// "read/NAME" or "sent/NAME": the field of each line that starts with a
// folder's name. A missing index lists none.
func (m *Mirror) indexed(day string) (map[string]bool, error) {
	names := map[string]bool{}
	f, err := os.Open(filepath.Join(m.dir, day, "index.txt"))
	if errors.Is(err, fs.ErrNotExist) {
		return names, nil
	}
	if err != nil {
		return nil, wrapFS("index", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		for field := range strings.SplitSeq(sc.Text(), "\t") {
			if isFolderPath(field) {
				names[field] = true
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, wrapFS("index", err)
	}
	return names, nil
}

// Sync makes every file and index line written so far durable: with one
// syncfs(2) of the file system that holds the mailbox where the system
// has it (one journal commit however many files were written since the
// last call), else with an fsync of each file, index and directory
// written since the last call.
func (m *Mirror) Sync() error {
	if m.sys.syncfs != nil {
		if err := m.sys.syncfs(m.dir); err != nil {
			return wrapFS("syncfs "+m.dir, err)
		}
		return nil
	}
	m.mu.Lock()
	todo := m.unsynced
	m.unsynced = dirSet{}
	m.mu.Unlock()
	var errs []error
	for _, p := range todo.list {
		if err := fsyncPath(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, wrapFS("sync", err))
		}
	}
	if len(errs) > 0 {
		// Try them all again next time.
		m.mu.Lock()
		for _, p := range todo.list {
			m.unsynced.add(p)
		}
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// fsyncPath fsyncs the file or directory at p.
func fsyncPath(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fsutil.SyncDir(p)
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Complete reports whether the mirror file at path is whole: not empty
// and ending with the armored envelope's last line. A file written
// without fsync and cut by a power loss fails this check (ext4 can keep
// the rename and lose the data); a file that passes holds its
// envelope.
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
	p.f = f
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

// appendIndexLine appends the index line of the file name ("inbox/NAME",
// "read/NAME" or "sent/NAME", relative to its day directory) to b.
func appendIndexLine(b []byte, when time.Time, prio string, hs []header, name, body string) []byte {
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
	b = when.AppendFormat(b, time.TimeOnly)
	for _, f := range [...]string{prio, kind, from, to} {
		b = append(b, '\t')
		b = append(b, f...)
	}
	b = append(b, '\t')
	b = append(b, name...)
	b = append(b, '\t')
	b = appendSummary(b, body)
	return append(b, '\n')
}

// summaryLen is how many characters of the body the index shows.
const summaryLen = 80

// summary returns the index summary of a body: each run of spaces and
// control characters becomes one space, then the first [summaryLen]
// characters, without a trailing space. Bytes that are not UTF-8 become
// "?".
func summary(body string) string { return string(appendSummary(nil, body)) }

// appendSummary appends the index summary of body to b.
func appendSummary(b []byte, body string) []byte {
	start := len(b)
	n := 0
	space := false
	for i, r := range body {
		if n == summaryLen {
			break
		}
		if r == ' ' || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			space = len(b) > start
			continue
		}
		if space {
			b = append(b, ' ')
			n++
			space = false
			if n == summaryLen {
				break
			}
		}
		if r == utf8.RuneError && isInvalidAt(body, i) {
			r = '?'
		}
		b = utf8.AppendRune(b, r)
		n++
	}
	return b
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, m.cfg.Access.fileMode())
	if err != nil {
		return wrapFS("index", err)
	}
	if created {
		if err := f.Chmod(m.cfg.Access.fileMode()); err != nil {
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
			if err := fsutil.SyncDir(filepath.Dir(ix.path)); err != nil {
				return wrapFS("fsync directory", err)
			}
		}
	} else if m.sys.syncfs == nil {
		m.unsynced.add(ix.path)
		if created {
			m.unsynced.add(filepath.Dir(ix.path))
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

// wrapFS wraps a file-system error, adding [ErrDiskFull] when the disk or
// the quota is full.
func wrapFS(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("mailbox: %s: %w: %w", op, ErrDiskFull, err)
	}
	return fmt.Errorf("mailbox: %s: %w", op, err)
}
