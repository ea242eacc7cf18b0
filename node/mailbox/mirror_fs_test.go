//go:build !windows

package mailbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The mirror writes each file to a temporary file and renames it into
// place without replacing anything. These tests cover the names, the
// modes, failures and removed directories; TestMirrorPortable runs every
// mirror test again with the forms of the calls every system has.

// envPortable, set in a test child, makes the mirror use portableSys.
const envPortable = "MESHD_TEST_MIRROR_PORTABLE"

func init() {
	if os.Getenv(envPortable) == "1" {
		defaultSys = portableSys
	}
}

// TestMirrorPortable runs the mirror tests again in a child with the
// portable forms (link and unlink, one fsync per file) that macOS and
// Windows use, so that Linux CI tests them too.
func TestMirrorPortable(t *testing.T) {
	if os.Getenv(envPortable) == "1" {
		t.Skip("in the child")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the native forms are the portable ones here")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMirror", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envPortable+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mirror tests with the portable forms: %v\n%s", err, out)
	}
	ran := bytes.Count(out, []byte("--- PASS: TestMirror"))
	if ran < 10 {
		t.Fatalf("only %d mirror tests passed in the child:\n%s", ran, out)
	}
	t.Logf("%d mirror tests passed with the portable forms", ran)
}

// The portable forms are in use in the child, and the native ones here.
func TestMirrorSysForms(t *testing.T) {
	m, _ := openMirror(t, testConfig())
	defer m.Close()
	portable := os.Getenv(envPortable) == "1" || runtime.GOOS != "linux"
	if got := m.sys.syncfs == nil; got != portable {
		t.Fatalf("syncfs unset %v, want %v", got, portable)
	}
}

// assertInbox checks that the inbox directory holds exactly names: no
// temporary file or other stray entry.
func assertInbox(t *testing.T, inbox string, names ...string) {
	t.Helper()
	es, err := os.ReadDir(inbox)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("%s holds %q, want %q", inbox, got, want)
	}
}

// checkFile checks a mirror file's content and its owner-only mode.
func checkFile(t *testing.T, path string, it Item) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if exp, _ := Render(it); !bytes.Equal(got, exp) {
		t.Errorf("%s:\n%s\nwant\n%s", path, got, exp)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode())
	}
}

// setUmask sets the process umask for the test.
func setUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// Files and folders are owner-only whatever the umask, and a mailbox root
// an older version made 0755 is repaired at Open.
func TestMirrorOwnerOnly(t *testing.T) {
	for _, mask := range []int{0o022, 0o077, 0o000, 0o002} {
		t.Run(strconv.FormatInt(int64(mask), 8), func(t *testing.T) {
			setUmask(t, mask)
			dir := filepath.Join(t.TempDir(), "mailbox")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(dir, 0o755)
			// A day an older version wrote: 0755 folders, a 0644 file.
			oldInbox := filepath.Join(dir, "2026-01-02", "inbox")
			os.MkdirAll(oldInbox, 0o755)
			oldFile := filepath.Join(oldInbox, "old.txt")
			os.WriteFile(oldFile, []byte("old"), 0o644)
			os.Chmod(filepath.Dir(oldInbox), 0o755)
			os.Chmod(oldInbox, 0o755)
			os.Chmod(oldFile, 0o644)
			m, err := Open(dir, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			items := []Item{linkItem(t, 1), linkItem(t, 2), linkItem(t, 3)}
			paths, err := m.Write(items...)
			if err != nil {
				t.Fatal(err)
			}
			inbox := filepath.Join(dir, "2026-11-21", "inbox")
			var names []string
			for i, it := range items {
				name := linkName(i+1) + ".txt"
				names = append(names, name)
				if paths[i] != filepath.Join(inbox, name) {
					t.Errorf("path %s, want %s", paths[i], filepath.Join(inbox, name))
				}
				checkFile(t, paths[i], it)
			}
			assertInbox(t, inbox, names...)
			if fi, err := os.Stat(oldFile); err != nil || fi.Mode() != 0o600 {
				t.Errorf("older file: mode %v, %v; want 0600", fi.Mode(), err)
			}
			for _, d := range []string{dir, filepath.Dir(inbox), inbox, oldInbox, filepath.Dir(oldInbox)} {
				if fi, err := os.Stat(d); err != nil || fi.Mode() != os.ModeDir|0o700 {
					t.Errorf("%s: mode %v, %v; want drwx------", d, fi.Mode(), err)
				}
			}
			if fi, err := os.Stat(filepath.Join(dir, "2026-11-21", "index.txt")); err != nil || fi.Mode() != 0o600 {
				t.Errorf("index: mode %v, %v; want 0600", fi.Mode(), err)
			}
		})
	}
}

// Name clashes take "-2" and never replace a file: whatever is in the way
// is kept, and nothing stray is left.
func TestMirrorNameClashes(t *testing.T) {
	setUmask(t, 0o077)
	m, dir := openMirror(t, DefaultConfig())
	defer m.Close()
	inbox := filepath.Join(dir, "2026-11-21", "inbox")
	// Someone else's file, and a directory, under the first names.
	if err := os.MkdirAll(filepath.Join(inbox, linkName(1)+"-2.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(inbox, linkName(1)+".txt")
	if err := os.WriteFile(theirs, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(theirs)
	a, b := linkItem(t, 1), linkItem(t, 2)
	paths, err := m.Write(a, b, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(inbox, linkName(1)+"-3.txt"),
		filepath.Join(inbox, linkName(2)+".txt"),
		filepath.Join(inbox, linkName(1)+"-4.txt"),
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %q, want %q", paths, want)
	}
	for i, it := range []Item{a, b, a} {
		checkFile(t, paths[i], it)
	}
	if got, err := os.ReadFile(theirs); err != nil || string(got) != "theirs" {
		t.Errorf("the file in the way: %q, %v", got, err)
	}
	if after, err := os.Stat(theirs); err != nil || !os.SameFile(before, after) || after.Mode() != 0o600 {
		t.Errorf("the file in the way was replaced or changed: %v", err)
	}
	names := []string{linkName(1) + ".txt", linkName(1) + "-2.txt", linkName(1) + "-3.txt", linkName(2) + ".txt", linkName(1) + "-4.txt"}
	assertInbox(t, inbox, names...)
	assertInbox(t, filepath.Join(dir, "2026-11-21"), "inbox", "index.txt")
}

// linkRename, the portable form, never replaces a file either, on file
// systems with hard links and without.
func TestLinkRename(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("a"), 0o600)
	os.WriteFile(b, []byte("b"), 0o600)
	if err := linkRename(a, b); !errors.Is(err, os.ErrExist) {
		t.Fatalf("rename over a file: %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(b); string(got) != "b" {
		t.Fatalf("b replaced: %q", got)
	}
	c := filepath.Join(dir, "c")
	if err := linkRename(a, c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a left after the rename: %v", err)
	}
	if got, _ := os.ReadFile(c); string(got) != "a" {
		t.Errorf("c holds %q", got)
	}
}

// A failed write or fsync leaves nothing behind.
func TestMirrorFailureLeavesNothing(t *testing.T) {
	m, dir := openMirror(t, DefaultConfig())
	defer m.Close()
	inbox := filepath.Join(dir, "2026-11-21", "inbox")
	m.write = func(f *os.File, b []byte) (int, error) {
		if strings.HasSuffix(filepath.Base(f.Name()), "index.txt") || !bytes.Contains(b, []byte("item 2")) {
			return f.Write(b)
		}
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.EDQUOT}
	}
	paths, err := m.Write(linkItem(t, 1), linkItem(t, 2), linkItem(t, 3))
	if !errors.Is(err, ErrDiskFull) || len(paths) != 2 {
		t.Fatalf("paths %q, err %v: want two files and ErrDiskFull", paths, err)
	}
	assertInbox(t, inbox, linkName(1)+".txt", linkName(3)+".txt")
}

// An inbox directory removed, or moved, by hand between batches or in the
// middle of one is made again.
func TestMirrorInboxRemoved(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	defer m.Close()
	day := filepath.Join(dir, "2026-11-21")
	inbox := filepath.Join(day, "inbox")
	write := func(want int, items ...Item) {
		t.Helper()
		paths, err := m.Write(items...)
		if err != nil || len(paths) != want {
			t.Fatalf("paths %q, err %v: want %d files", paths, err, want)
		}
	}
	write(1, linkItem(t, 1))
	assertInbox(t, inbox, linkName(1)+".txt")

	// Removed between batches.
	if err := os.RemoveAll(day); err != nil {
		t.Fatal(err)
	}
	write(1, linkItem(t, 2))
	assertInbox(t, inbox, linkName(2)+".txt")

	// Moved away between batches: the batch goes to a new directory under
	// the day's name.
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(day, moved); err != nil {
		t.Fatal(err)
	}
	write(1, linkItem(t, 3))
	assertInbox(t, inbox, linkName(3)+".txt")
	assertInbox(t, filepath.Join(moved, "inbox"), linkName(2)+".txt")

	// Removed while a batch is being written: the temporary files staged
	// before go with their directory and fail; the later one is written.
	m.write = func(f *os.File, b []byte) (int, error) {
		if bytes.Contains(b, []byte("item 5")) && filepath.Base(f.Name()) != "index.txt" {
			if err := os.RemoveAll(day); err != nil {
				t.Error(err)
			}
		}
		return f.Write(b)
	}
	paths, err := m.Write(linkItem(t, 4), linkItem(t, 5), linkItem(t, 6))
	if len(paths) != 1 || err == nil {
		t.Fatalf("paths %q, err %v: want 1 file and an error", paths, err)
	}
	assertInbox(t, inbox, linkName(6)+".txt")
	if ok, err := Complete(paths[0]); !ok || err != nil {
		t.Errorf("%s: complete %v, %v", paths[0], ok, err)
	}
	if idx, err := os.ReadFile(filepath.Join(day, "index.txt")); err != nil || strings.Count(string(idx), "\n") != 1 {
		t.Errorf("index: %v\n%s", err, idx)
	}
}

// Without syncfs, Sync fsyncs each file, index and directory written since
// the last Sync, and forgets them once they are durable.
func TestMirrorSyncPortable(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	defer m.Close()
	m.sys = portableSys
	paths, err := m.Write(linkItem(t, 1), linkItem(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{paths[0], paths[1], filepath.Join(dir, "2026-11-21", "inbox"), filepath.Join(dir, "2026-11-21", "index.txt")}
	for _, p := range want {
		if !m.unsynced.seen[p] {
			t.Errorf("%s not noted for the next Sync (noted %q)", p, m.unsynced.list)
		}
	}
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(m.unsynced.list) != 0 {
		t.Errorf("still noted after Sync: %q", m.unsynced.list)
	}
}

// With a group, folders are 0750 with the setgid bit, files 0640 and the
// outbox 0770 and sticky, all of that group (here the test's own group, which needs
// no root).
func TestMirrorGroupAccess(t *testing.T) {
	setUmask(t, 0o077)
	gid := os.Getgid()
	dir := filepath.Join(t.TempDir(), "mailbox")
	cfg := DefaultConfig()
	cfg.Access = GroupAccess(gid)
	m, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	oc := DefaultOutboxConfig()
	oc.Access = cfg.Access
	if _, err := OpenOutbox(dir, oc); err != nil {
		t.Fatal(err)
	}
	paths, err := m.Write(linkItem(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Dir(paths[0])
	for p, want := range map[string]os.FileMode{
		dir:                 os.ModeDir | os.ModeSetgid | 0o750,
		filepath.Dir(inbox): os.ModeDir | os.ModeSetgid | 0o750,
		inbox:               os.ModeDir | os.ModeSetgid | 0o750,
		paths[0]:            0o640,
		filepath.Join(dir, "2026-11-21", "index.txt"): 0o640,
		filepath.Join(dir, OutboxDir):                 os.ModeDir | os.ModeSetgid | os.ModeSticky | 0o770,
		filepath.Join(dir, processingDir):             os.ModeDir | os.ModeSetgid | 0o750,
		filepath.Join(dir, SentDir):                   os.ModeDir | os.ModeSetgid | 0o750,
		filepath.Join(dir, OutboxDir, readmeName):     0o640,
	} {
		if want == 0 {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; int(g) != gid {
			t.Errorf("%s: group %d, want %d", p, g, gid)
		}
	}
}
