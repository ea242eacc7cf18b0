//go:build linux

package mailbox

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRepairTreeSwapRace: a member of the mailbox group swaps a folder in
// the outbox that needs repair with a link to the home, as fast as it can
// (renameat2 RENAME_EXCHANGE), while the mailbox is opened again and
// again. The repair never follows the link: the home and the key keep
// their mode and group.
func TestRepairTreeSwapRace(t *testing.T) {
	home, key := secretHome(t)
	dir := filepath.Join(t.TempDir(), "mailbox")
	acc := GroupAccess(os.Getgid())
	cfg := DefaultConfig()
	cfg.Access = acc
	if _, err := Open(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutbox(dir, OutboxConfig{Access: acc}); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, OutboxDir, "d")
	l := filepath.Join(dir, OutboxDir, "l")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, l); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE: %v", err)
	}
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			// Make whichever is the folder need repair again, then swap.
			os.Chmod(d, 0o700)
			os.Chmod(l, 0o700)
			if unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
			}
		}
	})
	// The mode the loop above sets on the home through the link, when
	// chmod follows it, is the mode it has: a repair that followed the
	// link is the only way for the home to change.
	deadline := time.Now().Add(2 * time.Second)
	opens := 0
	for time.Now().Before(deadline) || opens < 50 {
		if _, err := Open(dir, cfg); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("open %d: %v", opens, err)
		}
		opens++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d opens during %d swaps", opens, swaps.Load())
	checkUntouched(t, home, key)
}
