package mailbox

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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
	// written is the bytes of the files Write and Rewrite have put in
	// place ([Mirror.Written]).
	written int64

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

// wrapFS wraps a file-system error, adding [ErrDiskFull] when the disk or
// the quota is full.
func wrapFS(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("mailbox: %s: %w: %w", op, ErrDiskFull, err)
	}
	return fmt.Errorf("mailbox: %s: %w", op, err)
}
