package home

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// fdOf returns the number of this process's descriptor open on path.
func fdOf(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && p == path {
			n, _ := strconv.Atoi(e.Name())
			return n
		}
	}
	t.Fatalf("no descriptor open on %s", path)
	return -1
}

// TestReleaseWhileDescriptorShared: a child process forked by another
// goroutine shares the lock's open file until it execs. release drops the
// lock at once all the same, so a meshd restarted in this process is not
// told its home is in use. (Closing the file alone left the lock held.)
func TestReleaseWhileDescriptorShared(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	release, err := h.Lock()
	if err != nil {
		t.Fatal(err)
	}
	// A duplicate shares the open file description, as a forked child does.
	dup, err := syscall.Dup(fdOf(t, h.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	again, err := h.Lock()
	if err != nil {
		t.Fatalf("lock after release while a copy of the file was open: %v", err)
	}
	again()
}
