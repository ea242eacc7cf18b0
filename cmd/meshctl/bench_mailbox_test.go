package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

// TestMailboxWatchTimesFiles makes mirror-like files in a mailbox whose day
// and inbox directories appear after the watch starts: each file is timed
// once, a second file of one envelope counts as a duplicate, one never
// written stays pending, and a file the events missed is found by a rescan,
// untimed.
func TestMailboxWatchTimesFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mw, err := watchMailbox(root)
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	defer mw.close()
	day := time.Now().UTC().Format(time.DateOnly)
	inbox := filepath.Join(root, day, "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := []string{
		"0190a1b2-c3d4-7e5f-8a9b-000000000000",
		"0190a1b2-c3d4-7e5f-8a9b-000000000001",
		"0190a1b2-c3d4-7e5f-8a9b-000000000002",
		"0190a1b2-c3d4-7e5f-8a9b-000000000003", // never written
		"0190a1b2-c3d4-7e5f-8a9b-000000000004", // written while nothing watches
	}
	write := func(seq int, name string) {
		if err := os.WriteFile(filepath.Join(inbox, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	at := map[int]time.Time{}
	found := func(seq int, t time.Time) { at[seq] = t }
	// The directories were made after the watch started: write until the
	// watch has added the inbox and sees the file.
	pending := []int{0, 1, 2, 3}
	testwait.For(t, 5*time.Second, "the first file to be seen", func() bool {
		write(0, "101530-000000000000.txt")
		pending = mw.match(pending, ids, found)
		return len(at) > 0
	})
	write(1, "101531-000000000001.txt")
	write(2, "101531-000000000002.txt")
	write(2, "101532-000000000002.txt")  // a second file of one envelope
	write(2, ".tmp-101532-000000000002") // not a mirror file name
	testwait.Until(5*time.Second, func() bool { pending = mw.match(pending, ids, found); return len(pending) <= 1 })
	if !slices.Equal(pending, []int{3}) {
		t.Fatalf("pending %v, want [3]", pending)
	}
	for seq := range 3 {
		if l := at[seq].Sub(sent); l <= 0 || l > 10*time.Second {
			t.Errorf("seq %d: appeared %v after the send", seq, l)
		}
	}
	mw.close()
	mw.close() // idempotent
	write(4, "101533-000000000004.txt")
	mw.rescan()
	if left := mw.match([]int{3, 4}, ids, found); !slices.Equal(left, []int{3}) {
		t.Fatalf("after the rescan, pending %v, want [3]", left)
	}
	if t4, ok := at[4]; !ok || !t4.IsZero() {
		t.Errorf("the rescanned file: %v, %v; want found, untimed", t4, ok)
	}
	dups, full, overflow, err := mw.status()
	if dups != 1 || full != 0 || overflow || err != nil {
		t.Errorf("status: %d duplicates, %d not noted, overflow %v, %v; want 1 duplicate", dups, full, overflow, err)
	}
}

// TestMailboxWatchSkipsOlderFiles: files in an inbox before the watch
// starts are from earlier runs and are not noted, unless a rescan (after
// lost events) reads them.
func TestMailboxWatchSkipsOlderFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	inbox := filepath.Join(root, time.Now().UTC().Format(time.DateOnly), "inbox")
	if err := os.MkdirAll(inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inbox, "090000-000000000009.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mw, err := watchMailbox(root)
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	defer mw.close()
	ids := []string{"0190a1b2-c3d4-7e5f-8a9b-000000000009"}
	none := func(int, time.Time) { t.Error("an older file was noted") }
	if left := mw.match([]int{0}, ids, none); len(left) != 1 {
		t.Fatal("an older file matched")
	}
	if _, err := watchMailbox(filepath.Join(root, "nope")); err == nil {
		t.Error("watching a mailbox that does not exist did not fail")
	}
}
