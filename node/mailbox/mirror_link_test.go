package mailbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshd/meshd/proto"
)

// The mirror stages each file as an anonymous file (O_TMPFILE) and links
// it into place; these tests cover each way of doing it, the fallback to a
// temporary file and a rename, and the open inbox directories.

// forceMode makes m stage its files one way, without probing.
func forceMode(m *Mirror, mode stageMode) {
	m.mode = mode
	if mode == modeLinkEmpty || mode == modeLinkProc {
		m.via = mode
	}
}

// requireTmpfile skips the test where the file system of dir makes no
// anonymous files.
func requireTmpfile(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Skipf("no O_TMPFILE in %s: %v", dir, err)
	}
	unix.Close(fd)
}

// linkItem is a message item delivered i seconds after t0.
func linkItem(t *testing.T, i int) Item {
	return Item{Env: sign(t, alice, i, proto.ToChannel(chanGeneral), msg("item "+strconv.Itoa(i), nil)),
		Priority: "normal", FromName: "alice", ToText: "#general", Delivered: t0.Add(time.Duration(i) * time.Second)}
}

// linkName is the file name of linkItem(i), before any "-2".
func linkName(i int) string {
	return t0.Add(time.Duration(i)*time.Second).Format("150405") + "-" + envID(i).String()[24:]
}

// assertInbox checks that the inbox directory holds exactly names: no
// temporary file, probe file or other stray entry.
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

// checkFile checks a mirror file's content and mode.
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
	if fi.Mode() != fileMode {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode(), os.FileMode(fileMode))
	}
}

// setUmask sets the process umask for the test.
func setUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestReadUmask(t *testing.T) {
	for _, mask := range []int{0o027, 0o000, 0o777, 0o022} {
		setUmask(t, mask)
		if got := readUmask(); got != mask {
			t.Errorf("readUmask() = %#o, want %#o", got, mask)
		}
	}
}

// Files staged as anonymous files get their content, their name and mode
// 0644 whatever the umask, and nothing else lands in the inbox.
func TestMirrorAnonymousFiles(t *testing.T) {
	for _, mask := range []int{0o022, 0o077, 0o000, 0o002} {
		t.Run(strconv.FormatInt(int64(mask), 8), func(t *testing.T) {
			setUmask(t, mask)
			m, dir := openMirror(t, DefaultConfig())
			defer m.Close()
			requireTmpfile(t, dir)
			if m.umask != mask {
				t.Fatalf("umask read at Open %#o, want %#o", m.umask, mask)
			}
			items := []Item{linkItem(t, 1), linkItem(t, 2), linkItem(t, 3)}
			paths, err := m.Write(items...)
			if err != nil {
				t.Fatal(err)
			}
			if m.mode != modeLinkEmpty && m.mode != modeLinkProc {
				t.Fatalf("mode %v after the first Write, want an O_TMPFILE mode", m.mode)
			}
			t.Logf("mode %v", m.mode)
			inbox := filepath.Join(dir, "2026-11-21", "inbox")
			if d := m.inboxDirs[inbox]; d == nil {
				t.Errorf("inbox directory not kept open")
			} else if want := mask&fileMode != 0 || hasDefaultACL(d.fd); d.chmod != want {
				t.Errorf("inbox directory %+v: want chmod %v", d, want)
			}
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
			verifyTree(t, dir, 3)
		})
	}
}

// TestMirrorModes runs the same batches with each way of staging files:
// name clashes take "-2" and never replace a file, whatever is in the way
// is kept, and nothing stray is left.
func TestMirrorModes(t *testing.T) {
	for _, mode := range []stageMode{modeUnknown, modeLinkEmpty, modeLinkProc, modeRename} {
		t.Run(mode.String(), func(t *testing.T) {
			setUmask(t, 0o077)
			m, dir := openMirror(t, DefaultConfig())
			defer m.Close()
			if mode != modeRename {
				requireTmpfile(t, dir)
			}
			forceMode(m, mode)
			var forms []int // linkat flags used
			m.linkat = func(oldfd int, oldpath string, newfd int, newpath string, flags int) error {
				forms = append(forms, flags)
				return unix.Linkat(oldfd, oldpath, newfd, newpath, flags)
			}
			if mode == modeRename {
				m.openTmpfile = func(int) (int, error) {
					t.Error("O_TMPFILE used in the rename mode")
					return -1, unix.EOPNOTSUPP
				}
			}
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

			switch mode {
			case modeUnknown:
				if m.mode != modeLinkEmpty && m.mode != modeLinkProc {
					t.Errorf("probed mode %v", m.mode)
				}
				t.Logf("probed: %v", m.mode)
			case modeLinkProc:
				for _, f := range forms {
					if f != unix.AT_SYMLINK_FOLLOW {
						t.Errorf("linkat flags %#x in the /proc mode", f)
					}
				}
				fallthrough
			default:
				if m.mode != mode {
					t.Errorf("mode %v, want %v kept", m.mode, mode)
				}
			}
			if mode == modeRename && len(forms) != 0 {
				t.Errorf("linkat used in the rename mode: %v", forms)
			}
			if mode == modeLinkEmpty && slices.ContainsFunc(forms, func(f int) bool { return f != unix.AT_EMPTY_PATH }) {
				t.Errorf("linkat flags %#x in the empty-path mode", forms)
			}
		})
	}
}

// Where the kernel refuses linkat(AT_EMPTY_PATH), the probe settles on
// /proc/self/fd, and a mirror that used the empty path switches.
func TestMirrorLinkRefusesEmptyPath(t *testing.T) {
	for _, start := range []stageMode{modeUnknown, modeLinkEmpty} {
		t.Run(start.String(), func(t *testing.T) {
			m, dir := openMirror(t, testConfig())
			defer m.Close()
			requireTmpfile(t, dir)
			forceMode(m, start)
			empty := 0
			m.linkat = func(oldfd int, oldpath string, newfd int, newpath string, flags int) error {
				if flags&unix.AT_EMPTY_PATH != 0 {
					empty++
					return unix.ENOENT // as without CAP_DAC_READ_SEARCH
				}
				return unix.Linkat(oldfd, oldpath, newfd, newpath, flags)
			}
			paths, err := m.Write(linkItem(t, 1), linkItem(t, 2))
			if err != nil {
				t.Fatal(err)
			}
			if m.mode != modeLinkProc || m.via != modeLinkProc {
				t.Errorf("mode %v via %v, want /proc", m.mode, m.via)
			}
			if empty != 1 {
				t.Errorf("empty path tried %d times, want once", empty)
			}
			for i, p := range paths {
				checkFile(t, p, linkItem(t, i+1))
			}
			assertInbox(t, filepath.Join(dir, "2026-11-21", "inbox"), linkName(1)+".txt", linkName(2)+".txt")
		})
	}
}

// Where the file system makes no anonymous files, or neither linkat form
// works (no /proc), the mirror writes temporary files and renames them.
func TestMirrorFallsBackToRename(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    func(int) (int, error)
		link    func(int, string, int, string, int) error
		start   stageMode // the mode found before the failures start
		wantErr bool      // for the files staged before the mirror found out
	}{
		{name: "no O_TMPFILE", open: func(int) (int, error) { return -1, unix.EOPNOTSUPP }},
		{name: "old kernel", open: func(int) (int, error) { return -1, unix.EISDIR }},
		{name: "no O_TMPFILE later", open: func(int) (int, error) { return -1, unix.EINVAL }, start: modeLinkEmpty},
		{name: "no linkat", link: func(int, string, int, string, int) error { return unix.ENOENT }},
		{name: "no linkat later", link: func(int, string, int, string, int) error { return unix.EPERM }, start: modeLinkEmpty, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := openMirror(t, testConfig())
			defer m.Close()
			requireTmpfile(t, dir)
			if tc.open != nil {
				m.openTmpfile = tc.open
			}
			if tc.link != nil {
				m.linkat = tc.link
			}
			inbox := filepath.Join(dir, "2026-11-21", "inbox")
			forceMode(m, tc.start)
			if tc.wantErr {
				// The probe succeeded and linkat fails from then on: the
				// files already staged fail, the later ones are renamed.
				paths, err := m.Write(linkItem(t, 1))
				if err == nil || len(paths) != 0 {
					t.Fatalf("paths %q, err %v: want a failure", paths, err)
				}
				t.Log(err)
				assertInbox(t, inbox)
			}
			paths, err := m.Write(linkItem(t, 2), linkItem(t, 3))
			if err != nil {
				t.Fatal(err)
			}
			if m.mode != modeRename {
				t.Errorf("mode %v, want %v", m.mode, modeRename)
			}
			for i, p := range paths {
				checkFile(t, p, linkItem(t, i+2))
			}
			assertInbox(t, inbox, linkName(2)+".txt", linkName(3)+".txt")
		})
	}
}

// A probe that fails for a passing reason (a full disk) decides nothing.
func TestMirrorProbeDiskFull(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	defer m.Close()
	requireTmpfile(t, dir)
	m.openTmpfile = func(int) (int, error) { return -1, unix.ENOSPC }
	if _, err := m.Write(linkItem(t, 1)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("error %v, want ErrDiskFull", err)
	}
	if m.mode != modeUnknown {
		t.Fatalf("mode %v after a full disk, want still unknown", m.mode)
	}
	m.openTmpfile = openTmpfile
	paths, err := m.Write(linkItem(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if m.mode == modeRename || m.mode == modeUnknown {
		t.Errorf("mode %v", m.mode)
	}
	checkFile(t, paths[0], linkItem(t, 2))
	assertInbox(t, filepath.Join(dir, "2026-11-21", "inbox"), linkName(2)+".txt")
}

// A failed write or fsync leaves nothing behind in any mode.
func TestMirrorFailureLeavesNothing(t *testing.T) {
	for _, mode := range []stageMode{modeLinkEmpty, modeLinkProc, modeRename} {
		t.Run(mode.String(), func(t *testing.T) {
			m, dir := openMirror(t, DefaultConfig())
			defer m.Close()
			requireTmpfile(t, dir)
			forceMode(m, mode)
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
		})
	}
}

// An inbox directory removed, or moved, by hand between batches or in the
// middle of one is made again, in every mode.
func TestMirrorInboxRemoved(t *testing.T) {
	for _, mode := range []stageMode{modeUnknown, modeLinkEmpty, modeLinkProc, modeRename} {
		t.Run(mode.String(), func(t *testing.T) {
			m, dir := openMirror(t, testConfig())
			defer m.Close()
			if mode != modeRename {
				requireTmpfile(t, dir)
			}
			forceMode(m, mode)
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

			// Moved away between batches: the batch goes to a new
			// directory under the day's name.
			moved := filepath.Join(dir, "moved")
			if err := os.Rename(day, moved); err != nil {
				t.Fatal(err)
			}
			write(1, linkItem(t, 3))
			assertInbox(t, inbox, linkName(3)+".txt")
			assertInbox(t, filepath.Join(moved, "inbox"), linkName(2)+".txt")

			// Removed while a batch is being written: the files staged
			// before are anonymous and land in the directory made again.
			// (Temporary files go with their directory: those fail, as
			// before anonymous files.)
			m.write = func(f *os.File, b []byte) (int, error) {
				if bytes.Contains(b, []byte("item 5")) && filepath.Base(f.Name()) != "index.txt" {
					if err := os.RemoveAll(day); err != nil {
						t.Error(err)
					}
				}
				return f.Write(b)
			}
			want := 3
			if m.mode == modeRename {
				want = 1
			}
			paths, err := m.Write(linkItem(t, 4), linkItem(t, 5), linkItem(t, 6))
			if len(paths) != want || (err != nil) != (want == 1) {
				t.Fatalf("paths %q, err %v: want %d files", paths, err, want)
			}
			if m.mode == modeRename {
				t.Log(err)
				assertInbox(t, inbox, linkName(6)+".txt")
			} else {
				assertInbox(t, inbox, linkName(4)+".txt", linkName(5)+".txt", linkName(6)+".txt")
			}
			for _, p := range paths {
				if ok, err := Complete(p); !ok || err != nil {
					t.Errorf("%s: complete %v, %v", p, ok, err)
				}
			}
			if idx, err := os.ReadFile(filepath.Join(day, "index.txt")); err != nil || strings.Count(string(idx), "\n") != want {
				t.Errorf("index: %v\n%s", err, idx)
			}
		})
	}
}

// The mirror keeps at most 8 inbox directories open; a batch over more
// days than that still writes every file, and Close closes them all.
func TestMirrorInboxDirsOpen(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	var items []Item
	for i := range 20 {
		it := linkItem(t, i+1)
		it.Delivered = t0.AddDate(0, 0, i%10)
		items = append(items, it)
	}
	paths, err := m.Write(items...)
	if err != nil || len(paths) != 20 {
		t.Fatalf("%d paths, err %v", len(paths), err)
	}
	if n := len(m.inboxDirs); n == 0 || n > 8 {
		t.Errorf("%d inbox directories kept open", n)
	}
	if len(m.retired) != 0 {
		t.Errorf("%d retired directories left open after Write", len(m.retired))
	}
	verifyTree(t, dir, 20)
	var fds []int
	for _, d := range m.inboxDirs {
		fds = append(fds, d.fd)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("fd %d still open after Close: %v", fd, err)
		}
	}
	// A Write after Close opens what it needs again.
	if _, err := m.Write(linkItem(t, 30)); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
