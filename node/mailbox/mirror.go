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
	"strconv"
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
	// SyncFiles fsyncs each file before it is linked (or renamed) into
	// place, and the directories after: a file under its final name then
	// survives a power loss. Default true. A writer whose items are
	// durable elsewhere (meshd: the history store) may turn it off, call
	// [Mirror.Sync] now and then, and after a power loss rewrite the files
	// [Complete] rejects.
	SyncFiles bool
	// BatchDirSync fsyncs each directory once per [Mirror.Write], after all
	// its links, instead of after each link. Default true: a directory
	// fsync costs about as much as a file's, so doing one per file nearly
	// doubles the cost of a busy inbox. False exists to measure that.
	BatchDirSync bool
	// Logger receives the cleanup of temporary files and the choice of
	// how files are staged; nil discards.
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

// stageMode is how a mirror stages its files and names them.
type stageMode uint8

const (
	// modeUnknown: not found out yet; the first file written probes.
	modeUnknown stageMode = iota
	// modeLinkEmpty: an anonymous file (O_TMPFILE), named with
	// linkat(fd, "", AT_EMPTY_PATH).
	modeLinkEmpty
	// modeLinkProc: an anonymous file, named with linkat of
	// /proc/self/fd/N (AT_SYMLINK_FOLLOW), where the kernel refuses the
	// empty path (many allow it only with CAP_DAC_READ_SEARCH).
	modeLinkProc
	// modeRename: a ".tmp-*" file, renamed into place, where the file
	// system makes no anonymous files or neither link form works.
	modeRename
)

func (s stageMode) String() string {
	return [...]string{"unknown", "O_TMPFILE+linkat(AT_EMPTY_PATH)", "O_TMPFILE+linkat(/proc/self/fd)", "temporary file+rename"}[s]
}

// inboxDir is an inbox directory known to exist, held open so that a file
// costs neither a stat of the directory nor a walk of its path.
type inboxDir struct {
	path     string
	fd       int    // O_RDONLY|O_DIRECTORY
	dev, ino uint64 // its identity, to notice it removed or replaced
	// chmod: a file made here needs an fchmod to get fileMode, because
	// the umask narrows it or is unknown, or a default ACL applies.
	chmod bool
	batch uint64 // the Write that last checked the directory
}

// Mirror writes mirror files under a mailbox root. It is safe for
// concurrent use; writes are serialized.
type Mirror struct {
	dir string
	cfg Config
	log *slog.Logger

	// mu serializes Write: the choice of free names, the links and the
	// index appends. It guards the fields below.
	mu sync.Mutex
	// inboxDirs are the inbox directories known to exist, held open.
	inboxDirs map[string]*inboxDir
	// retired are directories dropped from inboxDirs; files staged in this
	// Write may still use them, so they are closed when it ends.
	retired []*inboxDir
	// batch counts Writes: a cached directory is checked once per batch.
	batch uint64
	// mode is how files are staged and named, found by the first Write.
	mode stageMode
	// via is the linkat form that works, modeLinkEmpty or modeLinkProc,
	// once known. It outlives a switch of mode to modeRename, for the
	// anonymous files already staged.
	via stageMode
	// umask is the process umask read at Open, or -1 if unknown.
	umask int
	// index is the day index last appended to, kept open between batches.
	index *openIndex
	// day holds the paths of the day last written to (see dayLocked).
	day dayPaths

	// write writes to a file; tests replace it to inject failures.
	write func(f *os.File, b []byte) (int, error)
	// openTmpfile makes an anonymous file in a directory and linkat names
	// one; tests replace them to refuse a form.
	openTmpfile func(dirfd int) (int, error)
	linkat      func(olddirfd int, oldpath string, newdirfd int, newpath string, flags int) error
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
	m := &Mirror{dir: dir, cfg: cfg, log: log, inboxDirs: map[string]*inboxDir{},
		umask:       readUmask(),
		write:       func(f *os.File, b []byte) (int, error) { return f.Write(b) },
		openTmpfile: openTmpfile,
		linkat:      unix.Linkat,
		now:         time.Now}
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

// Close closes the index file and the directories the mirror keeps open.
// It is idempotent; a later Write opens what it needs again.
func (m *Mirror) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.inboxDirs {
		m.retired = append(m.retired, d)
	}
	clear(m.inboxDirs)
	m.closeRetiredLocked()
	return m.dropIndexLocked()
}

// readUmask returns the process umask, from /proc/self/status (the only
// way to read it without setting it), or -1 if it cannot.
func readUmask() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
			u, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			if err != nil || u > 0o777 {
				return -1
			}
			return int(u)
		}
	}
	return -1
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
	m.batch++
	defer m.closeRetiredLocked()
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
				if names == nil || names[name] {
					continue // the day's index unreadable, or the line there
				}
				names[name] = true
			}
			b := lines.of(p.day)
			b.Write(appendIndexLine(b.AvailableBuffer(), p.when, p.it.Priority, p.hs, name, p.body))
		}
	}
	if m.cfg.SyncFiles {
		for _, d := range dirs.list {
			if err := syncDir(d); err != nil {
				errs = append(errs, wrapFS("fsync directory", err))
			}
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
// Write links a batch's files before it appends their lines, so a crash in
// between, or a power loss before the next [Mirror.Sync], can leave files
// that their day's index lacks. paths[i] is the file of items[i], in its
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
		name := filepath.Base(paths[i])
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

// indexed returns the file names that day's index lists: the field of
// each line that starts with "inbox/", less that prefix. A missing index
// lists none.
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
			if name, ok := strings.CutPrefix(field, "inbox/"); ok {
				names[name] = true
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, wrapFS("index", err)
	}
	return names, nil
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
// the link or rename and lose the data); a file that passes holds its
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

// pending is a mirror file written, open and not yet in place: an
// anonymous file to link, or a temporary file to rename.
type pending struct {
	it   Item
	when time.Time // delivery time, UTC
	day  string    // its day, YYYY-MM-DD
	hs   []header
	body string
	dir  string    // its inbox directory
	d    *inboxDir // the open directory of an anonymous file; nil for a temporary file
	f    *os.File  // the file, open
	err  error     // of the fsync
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

// errNoTmpfile reports that a file could not be staged as an anonymous
// file and the mirror has switched to temporary files.
var errNoTmpfile = errors.New("no anonymous files")

// stageLocked renders it and writes it to an anonymous file in its inbox
// directory, or to a temporary file where anonymous files do not work.
// m.mu must be held.
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
	dayDir := dp.dayDir
	p.day, p.dir = dp.day, dp.inbox
	d, fresh, err := m.inboxDirLocked(dayDir, p.dir, dirs)
	if err != nil {
		return nil, err
	}
	if m.mode != modeRename {
		p.f, p.d, err = m.stageAnonLocked(d, dayDir, dirs, data)
		if err == nil {
			return p, nil
		}
		if err != errNoTmpfile {
			return nil, err
		}
	}
	if err := m.stageTempLocked(p, fresh, dayDir, dirs, data); err != nil {
		return nil, err
	}
	return p, nil
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

// stageAnonLocked writes data to a new anonymous file in d, or in d made
// again if it was removed. It returns errNoTmpfile where the mirror cannot
// use anonymous files.
func (m *Mirror) stageAnonLocked(d *inboxDir, dayDir string, dirs *dirSet, data []byte) (_ *os.File, _ *inboxDir, err error) {
	fd, err := m.openAnonLocked(d)
	if err != nil && err != errNoTmpfile && dirGone(d) {
		// Someone removed the directory since: make it again.
		if d, err = m.reopenDirLocked(d, dayDir, dirs); err != nil {
			return nil, nil, err
		}
		fd, err = m.openAnonLocked(d)
	}
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer func() {
		if err != nil {
			f.Close() // an anonymous file closed before it is linked is freed
		}
	}()
	// The umask (or a default ACL) may narrow the mode given to open.
	if d.chmod {
		if err = f.Chmod(fileMode); err != nil {
			return nil, nil, wrapFS("write", err)
		}
	}
	if _, err = m.write(f, data); err != nil {
		return nil, nil, wrapFS("write "+d.path, err)
	}
	return f, d, nil
}

// openAnonLocked opens a new anonymous file in d, once the mirror knows
// it can link one (see probeLocked). It returns errNoTmpfile, and
// switches the mirror to temporary files, where the file system refuses.
func (m *Mirror) openAnonLocked(d *inboxDir) (int, error) {
	if m.mode == modeUnknown {
		mode, err := m.probeLocked(d)
		if err != nil {
			return -1, err
		}
		m.mode = mode
		if mode != modeRename {
			m.via = mode
		}
		m.log.Debug("mailbox: staging files", "mode", mode)
	}
	if m.mode == modeRename {
		return -1, errNoTmpfile
	}
	fd, err := m.openTmpfile(d.fd)
	if err == nil {
		return fd, nil
	}
	if !transient(err) && !dirGone(d) {
		m.log.Info("mailbox: the file system makes no anonymous files; writing temporary files", "dir", d.path, "err", err)
		m.mode = modeRename
		return -1, errNoTmpfile
	}
	return -1, wrapFS("write", &fs.PathError{Op: "open O_TMPFILE", Path: d.path, Err: err})
}

// probeLocked finds out how the mirror can stage and name its files: it
// makes an empty anonymous file in d, links it to a temporary name with
// each linkat form in turn, and removes the name. It returns modeRename
// where neither works, and an error (leaving the question open) where the
// failure may be passing: a full disk, a removed directory.
func (m *Mirror) probeLocked(d *inboxDir) (stageMode, error) {
	fd, err := m.openTmpfile(d.fd)
	if err != nil {
		if transient(err) || dirGone(d) {
			return modeUnknown, wrapFS("write", &fs.PathError{Op: "open O_TMPFILE", Path: d.path, Err: err})
		}
		m.log.Info("mailbox: the file system makes no anonymous files; writing temporary files", "dir", d.path, "err", err)
		return modeRename, nil
	}
	defer unix.Close(fd)
	name := fmt.Sprintf("%sprobe-%d-%d", tempPrefix, os.Getpid(), time.Now().UnixNano())
	var errs []error
	for _, mode := range []stageMode{modeLinkEmpty, modeLinkProc} {
		err := m.linkAs(mode, fd, d.fd, name)
		if err == nil {
			if err := unix.Unlinkat(d.fd, name, 0); err != nil {
				// Harmless: readers skip it, and Open removes it.
				m.log.Warn("mailbox: remove probe file", "path", filepath.Join(d.path, name), "err", err)
			}
			return mode, nil
		}
		if transient(err) || errors.Is(err, unix.EEXIST) {
			return modeUnknown, wrapFS("write", &fs.PathError{Op: "link", Path: filepath.Join(d.path, name), Err: err})
		}
		errs = append(errs, fmt.Errorf("%v: %w", mode, err))
	}
	if dirGone(d) {
		return modeUnknown, wrapFS("write", &fs.PathError{Op: "link", Path: filepath.Join(d.path, name), Err: unix.ENOENT})
	}
	m.log.Info("mailbox: anonymous files cannot be linked here; writing temporary files", "dir", d.path, "err", errors.Join(errs...))
	return modeRename, nil
}

// linkLocked gives the anonymous file fd the name name in the directory
// dirfd, failing with EEXIST if that name is taken. Where the kernel
// stops taking the empty path, it switches the mirror to /proc.
func (m *Mirror) linkLocked(fd, dirfd int, name string) error {
	if m.via != modeLinkEmpty {
		return m.linkAs(modeLinkProc, fd, dirfd, name)
	}
	err := m.linkAs(modeLinkEmpty, fd, dirfd, name)
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if perr := m.linkAs(modeLinkProc, fd, dirfd, name); perr == nil || errors.Is(perr, unix.EEXIST) {
		m.via = modeLinkProc
		if m.mode == modeLinkEmpty {
			m.mode = modeLinkProc
		}
		return perr
	}
	return err
}

// linkAs links the anonymous file fd to dirfd/name with one linkat form.
func (m *Mirror) linkAs(mode stageMode, fd, dirfd int, name string) error {
	if mode == modeLinkEmpty {
		return m.linkat(fd, "", dirfd, name, unix.AT_EMPTY_PATH)
	}
	return m.linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// openTmpfile opens a new anonymous file, write only, in the directory
// dirfd.
func openTmpfile(dirfd int) (int, error) {
	return unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, fileMode)
}

// transient reports whether err may pass (a full disk, too many open
// files), so that it says nothing about what the file system supports.
func transient(err error) bool {
	for _, e := range []error{unix.ENOSPC, unix.EDQUOT, unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EINTR, unix.EAGAIN, unix.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// stageTempLocked writes data to a temporary file in p's inbox directory:
// the way files are staged where anonymous files do not work.
func (m *Mirror) stageTempLocked(p *pending, fresh bool, dayDir string, dirs *dirSet, data []byte) (err error) {
	f, err := os.CreateTemp(p.dir, tempPrefix+"*")
	if err != nil && !fresh && errors.Is(err, fs.ErrNotExist) {
		// Someone removed the directory since: make it again.
		if d := m.inboxDirs[p.dir]; d != nil {
			m.retireLocked(d)
		}
		if _, err := m.openDirLocked(dayDir, p.dir, dirs); err != nil {
			return err
		}
		f, err = os.CreateTemp(p.dir, tempPrefix+"*")
	}
	if err != nil {
		return wrapFS("write "+p.dir, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes 0600, and the umask may narrow OpenFile's mode.
	if err = f.Chmod(fileMode); err != nil {
		return wrapFS("write "+f.Name(), err)
	}
	if _, err = m.write(f, data); err != nil {
		return wrapFS("write "+f.Name(), err)
	}
	p.f = f
	return nil
}

// inboxDirLocked returns the inbox directory dir (in the day directory
// dayDir) open, creating it if it is missing. A directory kept from an
// earlier Write is checked once per Write, with a stat of its path, so
// that one removed, moved or replaced by hand is made or opened again.
// fresh reports that the directory was opened by this call.
func (m *Mirror) inboxDirLocked(dayDir, dir string, dirs *dirSet) (d *inboxDir, fresh bool, err error) {
	if d := m.inboxDirs[dir]; d != nil {
		if d.batch == m.batch {
			return d, false, nil
		}
		var st unix.Stat_t
		if unix.Stat(dir, &st) == nil && uint64(st.Dev) == d.dev && uint64(st.Ino) == d.ino {
			d.batch = m.batch
			return d, false, nil
		}
		m.retireLocked(d)
	}
	d, err = m.openDirLocked(dayDir, dir, dirs)
	return d, true, err
}

// reopenDirLocked returns the inbox directory of dead, a directory found
// removed, made again (or as another file already made it again).
func (m *Mirror) reopenDirLocked(dead *inboxDir, dayDir string, dirs *dirSet) (*inboxDir, error) {
	if cur := m.inboxDirs[dead.path]; cur != nil {
		if cur != dead && !dirGone(cur) {
			return cur, nil
		}
		m.retireLocked(cur)
	}
	return m.openDirLocked(dayDir, dead.path, dirs)
}

// openDirLocked opens the inbox directory dir (in the day directory
// dayDir), creating it if it is missing, and keeps it in m.inboxDirs.
func (m *Mirror) openDirLocked(dayDir, dir string, dirs *dirSet) (*inboxDir, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return nil, wrapFS("create "+dir, err)
		}
		// The new directories' entries must reach the disk too.
		dirs.add(m.dir)
		dirs.add(dayDir)
		fd, err = unix.Open(dir, flags, 0)
	}
	if err != nil {
		return nil, wrapFS("create", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, wrapFS("create", &fs.PathError{Op: "fstat", Path: dir, Err: err})
	}
	d := &inboxDir{path: dir, fd: fd, dev: uint64(st.Dev), ino: uint64(st.Ino), batch: m.batch,
		chmod: m.umask < 0 || m.umask&fileMode != 0 || hasDefaultACL(fd)}
	if len(m.inboxDirs) >= 8 {
		// One entry a day; keep it small.
		for _, d := range m.inboxDirs {
			m.retired = append(m.retired, d)
		}
		clear(m.inboxDirs)
	}
	m.inboxDirs[dir] = d
	return d, nil
}

// retireLocked drops d, which is in m.inboxDirs, to be closed at the end
// of the Write.
func (m *Mirror) retireLocked(d *inboxDir) {
	delete(m.inboxDirs, d.path)
	m.retired = append(m.retired, d)
}

// closeRetiredLocked closes the directories dropped from m.inboxDirs.
func (m *Mirror) closeRetiredLocked() {
	for _, d := range m.retired {
		unix.Close(d.fd)
	}
	m.retired = nil
}

// dirGone reports whether the open directory d has been removed.
func dirGone(d *inboxDir) bool {
	var st unix.Stat_t
	return unix.Fstat(d.fd, &st) != nil || st.Nlink == 0
}

// hasDefaultACL reports whether files created in the directory fd take
// their permissions from a default ACL instead of the umask (or whether
// it cannot tell).
func hasDefaultACL(fd int) bool {
	_, err := unix.Fgetxattr(fd, "system.posix_acl_default", nil)
	return !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.EOPNOTSUPP)
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

// publishLocked puts a staged file in place under a free name and returns
// its path. m.mu must be held.
func (m *Mirror) publishLocked(p *pending, dirs *dirSet) (string, error) {
	var (
		path string
		err  error
	)
	if p.d != nil {
		path, err = m.linkStagedLocked(p, dirs)
	} else {
		path, err = m.renameStagedLocked(p)
	}
	if err != nil {
		return "", err
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

// baseName returns the name of p's file less any "-2" and the ".txt".
func (p *pending) baseName() string { return nameBase(p.when, p.it.Env.ID.String()) }

// linkStagedLocked links p's anonymous file under a free name and closes
// it. A file that fails is closed unlinked, which frees it.
func (m *Mirror) linkStagedLocked(p *pending, dirs *dirSet) (path string, err error) {
	defer func() {
		cerr := p.f.Close()
		if err == nil && cerr != nil {
			// Not known to be whole: take the name back.
			unix.Unlinkat(p.d.fd, filepath.Base(path), 0)
			path, err = "", wrapFS("write "+path, cerr)
		}
	}()
	if p.err != nil {
		return "", wrapFS("write "+p.dir, fmt.Errorf("fsync: %w", p.err))
	}
	path, err = m.linkFreeLocked(p, p.baseName(), ".txt")
	if err != nil && dirGone(p.d) {
		// Someone removed the directory since the file was staged: make
		// it again.
		d, rerr := m.reopenDirLocked(p.d, filepath.Dir(p.dir), dirs)
		if rerr != nil {
			return "", rerr
		}
		p.d = d
		path, err = m.linkFreeLocked(p, p.baseName(), ".txt")
	}
	if err != nil {
		if !transient(err) && !dirGone(p.d) {
			// Neither linkat form works any more (/proc unmounted?): the
			// files after this one take the rename path.
			m.log.Info("mailbox: anonymous files cannot be linked any more; writing temporary files", "err", err)
			m.mode = modeRename
		}
		return "", wrapFS("write", err)
	}
	return path, nil
}

// linkFreeLocked links p's anonymous file to p.dir/base+ext, or with
// "-2", "-3", ... after base if that is taken, and returns the path.
// linkat never replaces a file.
func (m *Mirror) linkFreeLocked(p *pending, base, ext string) (string, error) {
	fd := int(p.f.Fd())
	for n := 1; ; n++ {
		name := numberedName(base, ext, n)
		err := m.linkLocked(fd, p.d.fd, name)
		switch {
		case err == nil:
			return filepath.Join(p.dir, name), nil
		case errors.Is(err, unix.EEXIST):
			continue
		default:
			return "", &fs.PathError{Op: "link", Path: filepath.Join(p.dir, name), Err: err}
		}
	}
}

// renameStagedLocked closes p's temporary file and renames it into place
// under a free name.
func (m *Mirror) renameStagedLocked(p *pending) (string, error) {
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
		path, err = renameFree(tmp, p.dir, p.baseName(), ".txt")
	}
	if err != nil {
		os.Remove(tmp)
		return "", wrapFS("write "+tmp, err)
	}
	return path, nil
}

// renameFree renames tmp to dir/base+ext, or with "-2", "-3", ... after
// base if that is taken, and returns the new path. It never replaces a
// file: renameat2 with RENAME_NOREPLACE checks and renames in one call.
// Where that is not supported it falls back to a free name and rename.
func renameFree(tmp, dir, base, ext string) (string, error) {
	for n := 1; ; n++ {
		name := numberedName(base, ext, n)
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

// appendIndexLine appends the index line of the file name in the day's
// inbox directory to b.
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
	b = append(b, "\tinbox/"...)
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

// syncDir makes the links, renames and creations in dir durable.
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
