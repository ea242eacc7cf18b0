package home

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrLocked: another process holds the home's lock.
var ErrLocked = errors.New("home is in use")

// Lock takes the home's lock: an exclusive, non-blocking lock (flock on
// Unix, LockFileEx on Windows) on [Home.LockPath], into which it writes our pid. Only one meshd may use a
// home at a time; if another holds it, Lock fails with [ErrLocked] and
// names its pid. The lock belongs to the open file, so it is released by
// release or when the process dies, and a second Lock in the same process
// conflicts too. release is idempotent. The lock file itself is left in
// place: removing it would let two processes lock two different files.
func (h Home) Lock() (release func() error, err error) {
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", h.Dir, err)
	}
	path := h.LockPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", h.Dir, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("%w: home %s is in use by another meshd%s", ErrLocked, h.Dir, holder(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	var once sync.Once
	return func() error {
		var err error
		once.Do(func() {
			// Truncate first so a stale pid is never reported. Unlock
			// before Close: a child process forked by another goroutine
			// of this process holds the open file until it execs, and
			// Close alone leaves the lock held that long, so a meshd
			// restarted in this process found its home in use.
			_ = f.Truncate(0)
			_ = unlockFile(f)
			err = f.Close()
		})
		return err
	}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holder returns " (pid N)" naming the process that holds the lock, if the
// lock file says.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", pid)
}
