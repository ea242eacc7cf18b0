package history

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestUnlockSharedWhileDescriptorShared: checkLocked's shared lock is
// dropped by unlockShared even while a forked child still shares the
// open file (here a duplicate descriptor), so bbolt's exclusive lock,
// taken next, does not fail. Closing the file alone left it held.
func TestUnlockSharedWhileDescriptorShared(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockShared(f); err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := unlockShared(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := syscall.Flock(int(g.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("exclusive lock after unlockShared while a copy of the file was open: %v", err)
	}
}
