package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMailboxNameID(t *testing.T) {
	for name, want := range map[string]string{
		"101530-0123456789ab.txt":   "0123456789ab",
		"101530-0123456789ab-2.txt": "0123456789ab",
		"index.txt":                 "",
		"101530-0123.txt":           "",
		".tmp-123":                  "",
		"101530_0123456789ab.txt":   "",
	} {
		got, ok := mailboxNameID(name)
		if got != want || ok != (want != "") {
			t.Errorf("mailboxNameID(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestMailboxWatchTimesFiles makes mirror-like files in a mailbox whose day
// and inbox directories appear after the watch starts, and in one that
// exists before: each wanted file is timed once, whether it appears
// before or after it is asked for, and one that never appears is counted.
func TestMailboxWatchTimesFiles(t *testing.T) {
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
	sent := time.Now()
	id := func(i int) string { return "00000000-0000-0000-0000-0000000000" + string(rune('a'+i/10)) + string(rune('0'+i%10)) }
	write := func(i int) {
		name := filepath.Join(inbox, "101530-"+id(i)[len(id(i))-12:]+".txt")
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Asked for before the file appears.
	mw.want(id(1), sent)
	// The directories were made after the watch: give it time to add the
	// inbox before the next file, which is asked for after it appears.
	deadline := time.Now().Add(5 * time.Second)
	for mw.pending() > 0 {
		write(1)
		if time.Now().After(deadline) {
			t.Fatal("the file asked for before it appeared was never seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	write(2)
	for {
		mw.mu.Lock()
		_, ok := mw.appeared[id(2)[len(id(2))-12:]]
		mw.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a file that appeared before it was asked for was not noted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mw.want(id(2), sent)
	mw.want(id(3), sent) // never written
	lat, missing := mw.finish()
	if len(lat) != 2 || missing != 1 {
		t.Fatalf("timed %d files, %d missing; want 2 and 1", len(lat), missing)
	}
	for _, l := range lat {
		if l <= 0 || l > 10*time.Second {
			t.Errorf("latency %v", l)
		}
	}
}
