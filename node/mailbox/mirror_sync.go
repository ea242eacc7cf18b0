package mailbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"

	"github.com/meshd/meshd/internal/fsutil"
)

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
