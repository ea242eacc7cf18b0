//go:build !windows

package mailbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secretHome makes a folder that stands for the node's home, with a
// key-like file in it, and returns the folder and the file.
func secretHome(t *testing.T) (home, key string) {
	t.Helper()
	home = filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	key = filepath.Join(home, "identity.key")
	if err := os.WriteFile(key, []byte("PRIVATE KEY BYTES"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, key
}

// checkUntouched fails t if the home or its key changed mode or group.
func checkUntouched(t *testing.T, home, key string) {
	t.Helper()
	for p, want := range map[string]os.FileMode{home: os.ModeDir | 0o700, key: 0o600} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; int(g) != os.Getgid() {
			t.Errorf("%s: given to group %d", p, g)
		}
	}
}

// TestOutboxLegacyProcessingLink: an outbox/.processing that a member of
// the mailbox group replaced with a link to the home is never followed:
// nothing of the home is read, moved to failed/ or changed.
func TestOutboxLegacyProcessingLink(t *testing.T) {
	home, key := secretHome(t)
	s := &sender{}
	e := startOutbox(t, OutboxConfig{Access: GroupAccess(os.Getgid())}, s, nil)
	e.stop()
	legacy := filepath.Join(e.dir, OutboxDir, processingDir)
	os.RemoveAll(legacy) // where an older version kept it
	if err := os.Symlink(home, legacy); err != nil {
		t.Fatal(err)
	}
	e = startOutboxIn(t, e.dir, OutboxConfig{Access: GroupAccess(os.Getgid())}, s, nil)
	e.drop(t, "after.txt", "To: @bob\n---\nhi\n")
	waitFile(t, filepath.Join(e.dir, SentDir, "after.txt"), 5*time.Second)
	e.stop()
	checkUntouched(t, home, key)
	if b, err := os.ReadFile(key); err != nil || string(b) != "PRIVATE KEY BYTES" {
		t.Fatalf("the key moved or changed: %v %q", err, b)
	}
	if es, _ := os.ReadDir(filepath.Join(e.dir, FailedDir)); len(es) != 0 {
		t.Errorf("failed/ holds %v", es)
	}
	if st := e.o.Stats(); st.Recovered != 0 {
		t.Errorf("recovered %d files through the link", st.Recovered)
	}
	if fi, err := os.Lstat(legacy); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was not left alone: %v %v", fi, err)
	}
}

// TestOutboxLegacyProcessing: files an older version left in its own
// outbox/.processing are sent again, from the new place, and the old
// folder goes.
func TestOutboxLegacyProcessing(t *testing.T) {
	e := startOutbox(t, OutboxConfig{}, nil, nil)
	e.stop()
	legacy := filepath.Join(e.dir, OutboxDir, processingDir)
	if err := os.MkdirAll(legacy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "old.txt"), []byte("To: @bob\n---\nold\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e = startOutboxIn(t, e.dir, OutboxConfig{}, nil, nil)
	waitFile(t, filepath.Join(e.dir, SentDir, "old.txt"), 5*time.Second)
	e.stop()
	if st := e.o.Stats(); st.Recovered != 1 {
		t.Errorf("recovered %d, want 1", st.Recovered)
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Errorf("outbox/.processing still there: %v", err)
	}
}

// TestOutboxHardLinkRefused: a hard link dropped in the outbox (a name for
// a file elsewhere, such as the key) is not read: it goes to failed/ with
// the reason, and the .error file quotes nothing of it.
func TestOutboxHardLinkRefused(t *testing.T) {
	home, key := secretHome(t)
	e := startOutbox(t, OutboxConfig{}, nil, nil)
	name := filepath.Join(e.dir, OutboxDir, "key.txt")
	if err := os.Link(key, name); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	waitFile(t, filepath.Join(e.dir, FailedDir, "key.txt.error"), 5*time.Second)
	e.stop()
	reason := readFile(t, filepath.Join(e.dir, FailedDir, "key.txt.error"))
	if !strings.Contains(reason, "hard link") || strings.Contains(reason, "PRIVATE") {
		t.Errorf(".error: %q", reason)
	}
	if st := e.o.Stats(); st.FailedByReason[ReasonUnreadable] != 1 {
		t.Errorf("stats %+v", st)
	}
	checkUntouched(t, home, key)
}

// TestRepairTreeForeignEntries: a folder in the mailbox that meshd's user
// does not own (a member's mkdir in the outbox, or anything elsewhere) is
// neither changed nor entered, and does not stop the start.
func TestRepairTreeForeignEntries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a folder to another user needs root")
	}
	dir := filepath.Join(t.TempDir(), "mailbox")
	const gid = 64998
	acc := GroupAccess(gid)
	cfg := DefaultConfig()
	cfg.Access = acc
	if _, err := Open(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutbox(dir, OutboxConfig{Access: acc}); err != nil {
		t.Fatal(err)
	}
	foreign := []string{filepath.Join(dir, OutboxDir, "x"), filepath.Join(dir, "2026-01-01")}
	for _, p := range foreign {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	inner := filepath.Join(foreign[1], "inbox")
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	before := map[string]os.FileMode{}
	for _, p := range append(foreign, inner) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = fi.Mode()
	}
	if _, err := Open(dir, cfg); err != nil {
		t.Fatalf("open with a member's folders in the mailbox: %v", err)
	}
	if _, err := OpenOutbox(dir, OutboxConfig{Access: acc}); err != nil {
		t.Fatalf("open outbox: %v", err)
	}
	for _, p := range append(foreign, inner) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != before[p] || st.Gid == gid {
			t.Errorf("%s: mode %v group %d: changed", p, fi.Mode(), st.Gid)
		}
	}
}
