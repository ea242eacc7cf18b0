//go:build !windows

package mailbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

func TestMirrorWrite(t *testing.T) {
	m, dir := openMirror(t, DefaultConfig())
	late := time.Date(2026, 11, 21, 23, 59, 58, 0, time.FixedZone("CET", 3600)) // 22:59:58 UTC
	next := time.Date(2026, 11, 22, 0, 0, 3, 0, time.UTC)
	a := Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("hello\tthere\n\n  world  ", nil)),
		Priority: "normal", FromName: "alice", ToText: "#general", Delivered: late}
	b := Item{Env: sign(t, alice, 2, proto.ToPeer(pub(bob)), request(t, "run-tests", `{"suite":"unit"}`, 0, nil)),
		Priority: "high", FromName: "alice", ToText: "@bob", Delivered: next}
	paths, err := m.Write(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join(dir, "2026-11-21", "inbox", "225958-000000000001.txt"),
		filepath.Join(dir, "2026-11-22", "inbox", "000003-000000000002.txt"),
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %q, want %q", paths, want)
	}
	for i, it := range []Item{a, b} {
		got, err := os.ReadFile(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		exp, _ := Render(it)
		if !bytes.Equal(got, exp) {
			t.Errorf("%s:\n%s\nwant\n%s", paths[i], got, exp)
		}
		fi, _ := os.Stat(paths[i])
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", paths[i], fi.Mode())
		}
	}
	idx, err := os.ReadFile(filepath.Join(dir, "2026-11-21", "index.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := "22:59:58\tnormal\tmessage\talice (" + pub(alice).Fingerprint() + ")\t#general\tinbox/225958-000000000001.txt\thello there world\n"
	if string(idx) != wantIdx {
		t.Errorf("index\n%q\nwant\n%q", idx, wantIdx)
	}
	idx, _ = os.ReadFile(filepath.Join(dir, "2026-11-22", "index.txt"))
	wantIdx = "00:00:03\thigh\trequest\talice (" + pub(alice).Fingerprint() + ")\t@bob\tinbox/000003-000000000002.txt\t{ \"suite\": \"unit\" }\n"
	if string(idx) != wantIdx {
		t.Errorf("index\n%q\nwant\n%q", idx, wantIdx)
	}

	// The same envelope again, twice: name clash suffixes, and index lines
	// appended.
	paths, err = m.Write(a, a)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		filepath.Join(dir, "2026-11-21", "inbox", "225958-000000000001-2.txt"),
		filepath.Join(dir, "2026-11-21", "inbox", "225958-000000000001-3.txt"),
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %q, want %q", paths, want)
	}
	idx, _ = os.ReadFile(filepath.Join(dir, "2026-11-21", "index.txt"))
	if lines := strings.Split(strings.TrimSuffix(string(idx), "\n"), "\n"); len(lines) != 3 || !strings.Contains(lines[2], "inbox/225958-000000000001-3.txt") {
		t.Errorf("index after the clash:\n%s", idx)
	}
	assertNoTemps(t, dir)
}

func TestMirrorSummary(t *testing.T) {
	long := strings.Repeat("é", 100)
	for in, want := range map[string]string{
		"":                        "",
		"  \n\t hi \r\n there ":   "hi there",
		long:                      strings.Repeat("é", 80),
		"a\xffb":                  "a?b",
		strings.Repeat("ab ", 40): strings.TrimSpace(strings.Repeat("ab ", 27)),
	} {
		if got := summary(in); got != want {
			t.Errorf("summary(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMirrorPartialBatch(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	good := Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("ok", nil))}
	bad := Item{Env: good.Env, ToText: "@bob"} // the wrong sigil for a channel
	paths, err := m.Write(bad, good)
	if err == nil || len(paths) != 1 {
		t.Fatalf("paths %q, err %v: want one file and an error", paths, err)
	}
	if _, err := os.Stat(paths[0]); err != nil {
		t.Error(err)
	}
	assertNoTemps(t, dir)
}

func TestMirrorOpenRemovesTemps(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	if _, err := m.Write(Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("x", nil)), Delivered: t0}); err != nil {
		t.Fatal(err)
	}
	day := filepath.Join(dir, "2026-11-21")
	stale := []string{filepath.Join(day, "inbox", ".tmp-123"), filepath.Join(day, ".tmp-456")}
	keep := []string{filepath.Join(day, "inbox", ".draft"), filepath.Join(dir, "notes", ".tmp-789")}
	for _, p := range append(slices.Clone(stale), keep...) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(dir, testConfig()); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want removed", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want kept", p, err)
		}
	}
}

func TestMirrorTornIndex(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	idx := filepath.Join(dir, "2026-11-21", "index.txt")
	os.MkdirAll(filepath.Dir(idx), 0o755)
	if err := os.WriteFile(idx, []byte("12:00:00\tnormal\tmess"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Write(Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("x", nil)), Delivered: t0}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(idx)
	if lines := strings.Split(string(b), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "12:00:01\t") {
		t.Errorf("index after a torn line:\n%q", b)
	}
}

// TestMirrorReindex: a crash between a batch's links and its index append
// leaves files the index lacks, the last line maybe cut short. Reindex
// appends exactly the missing lines, once, as Write would have written
// them.
func TestMirrorReindex(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	var items []Item
	for i := range 3 {
		items = append(items, Item{Env: sign(t, alice, i+1, proto.ToChannel(chanGeneral), msg(fmt.Sprintf("item %d", i), nil)),
			Priority: "normal", FromName: "alice", ToText: "#general", Delivered: t0.Add(time.Duration(i) * time.Second)})
	}
	paths, err := m.Write(items...)
	if err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "2026-11-21", "index.txt")
	whole, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(whole), "\n")
	// The crash: the first line kept, the second cut within its file
	// name, the third lost.
	cut := lines[0] + lines[1][:strings.Index(lines[1], "inbox/")+10]
	if err := os.WriteFile(idx, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m, err = Open(dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	added, err := m.Reindex(items, paths)
	if err != nil || added != 2 {
		t.Fatalf("Reindex: %d lines, %v; want 2", added, err)
	}
	got, _ := os.ReadFile(idx)
	if want := cut + "\n" + lines[1] + lines[2]; string(got) != want {
		t.Errorf("index after Reindex:\n%q\nwant\n%q", got, want)
	}
	if added, err := m.Reindex(items, paths); err != nil || added != 0 {
		t.Errorf("Reindex again: %d lines, %v; want none", added, err)
	}
	if _, err := m.Reindex(items, paths[:2]); err == nil {
		t.Error("Reindex with fewer paths than items did not fail")
	}
}

func TestMirrorDiskFullInjected(t *testing.T) {
	m, dir := openMirror(t, DefaultConfig())
	m.write = func(f *os.File, b []byte) (int, error) {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	paths, err := m.Write(Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("x", nil)), Delivered: t0})
	if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("error %v, want ErrDiskFull wrapping ENOSPC", err)
	}
	if len(paths) != 0 {
		t.Errorf("paths %q", paths)
	}
	t.Log(err)
	es, _ := os.ReadDir(filepath.Join(dir, "2026-11-21", "inbox"))
	if len(es) != 0 {
		t.Errorf("inbox holds %v after a failed write", es)
	}
}

// TestMirrorDiskFullTmpfs fills a real 64 KiB tmpfs (root only).
func TestMirrorDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	dir := filepath.Join(mnt, "mailbox")
	m, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // before the unmount: the index is open
	body := strings.Repeat("x", 6000)
	var written []string
	for i := 1; i <= 40; i++ {
		paths, err := m.Write(Item{Env: sign(t, alice, i, proto.ToChannel(chanGeneral), msg(body, nil)), Delivered: t0})
		written = append(written, paths...)
		if err != nil {
			if !errors.Is(err, ErrDiskFull) {
				t.Fatalf("write %d: %v, want ErrDiskFull", i, err)
			}
			t.Logf("write %d: %v", i, err)
			break
		}
		if i == 40 {
			t.Fatal("a 64 KiB file system took 40 files of 8 KiB")
		}
	}
	if len(written) == 0 {
		t.Fatal("nothing written before the disk filled")
	}
	assertNoTemps(t, dir)
	verifyTree(t, dir, len(written))
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

// verifyTree checks that every *.txt file in the day inbox directories
// under dir verifies, and that there are at least min of them.
func verifyTree(t *testing.T, dir string, min int) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) != "inbox" || !strings.HasSuffix(p, ".txt") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if _, err := Verify(b, VerifyOptions{}); err != nil {
			t.Errorf("%s (%d bytes): %v", p, len(b), err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < min {
		t.Errorf("%d files verified, want at least %d", n, min)
	}
	return n
}

// envCrashDir makes the test binary a child that writes mirror files into
// the directory it names until it is killed.
const envCrashDir = "MESHD_MAILBOX_CRASH_DIR"

// TestMirrorCrashChild is the child of TestMirrorCrash.
func TestMirrorCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("child of TestMirrorCrash")
	}
	m, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// Large bodies, so that the kill often lands in the middle of a write.
	body := strings.Repeat("0123456789abcdef\n", 12<<10)
	for i := 0; ; i++ {
		items := make([]Item, 4)
		for j := range items {
			items[j] = Item{Env: sign(t, alice, (i*4+j)%65536, proto.ToChannel(chanGeneral), msg(body, nil)), Priority: "normal"}
		}
		if _, err := m.Write(items...); err != nil {
			t.Fatal(err)
		}
		fmt.Println("batch", i)
	}
}

// TestMirrorCrash kills a writer in the middle of a burst and checks that
// no partial or corrupt file is left under a final name, and that Open
// removes the temporary files.
func TestMirrorCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	dir := filepath.Join(t.TempDir(), "mailbox")
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMirrorCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for a few batches, then kill at a moment that varies.
		buf := make([]byte, 4096)
		batches := 0
		for batches < 3+round {
			n, err := out.Read(buf)
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			batches += strings.Count(string(buf[:n]), "batch ")
		}
		time.Sleep(time.Duration(round*3+1) * time.Millisecond) // deliberate: the kill falls at a point that varies by round
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	temps := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			temps++
		}
		return nil
	})
	t.Logf("temporary files left by the kills: %d", temps)
	n := verifyTree(t, dir, 9)
	t.Logf("%d files verified", n)
	if _, err := Open(dir, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	assertNoTemps(t, dir)
}

// BenchmarkMirror compares one directory fsync per batch of 64 files with
// one per file (a Write of one item).
func BenchmarkMirror(b *testing.B) {
	for _, bc := range []struct {
		name  string
		batch int
		cfg   Config
	}{
		{"checkpointed", 64, Config{SyncFiles: false}}, // meshd: one Sync at the end
		{"batched", 64, DefaultConfig()},
		{"perfile", 1, DefaultConfig()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "mailbox")
			if base := os.Getenv("MESHD_BENCH_DIR"); base != "" {
				d, err := os.MkdirTemp(base, "mirror-")
				if err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(d)
				dir = filepath.Join(d, "mailbox")
			}
			m, err := Open(dir, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			items := make([]Item, b.N)
			body := strings.Repeat("a line of an ordinary message, about 1 KiB in all.\n", 20)
			for i := range items {
				items[i] = Item{Env: sign(b, alice, i, proto.ToChannel(chanGeneral), msg(body+strconv.Itoa(i), nil)),
					Priority: "normal", FromName: "alice", ToText: "#general", Delivered: t0.Add(time.Duration(i) * time.Second)}
			}
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < len(items); i += bc.batch {
				if _, err := m.Write(items[i:min(i+bc.batch, len(items))]...); err != nil {
					b.Fatal(err)
				}
			}
			// The writes alone, without the checkpoint's writeback: what a
			// file costs the mirror's goroutine, in time and in CPU (user
			// and system, of the whole process).
			writing := time.Since(start)
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			if !bc.cfg.SyncFiles {
				if err := m.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
			b.ReportMetric(float64(writing.Microseconds())/float64(b.N), "write-us/file")
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/file")
		})
	}
}

func TestMirrorSyncAndComplete(t *testing.T) {
	m, _ := openMirror(t, testConfig())
	it := Item{Env: sign(t, alice, 7, proto.ToChannel(chanGeneral), msg("checkpoint me", nil)),
		Priority: "normal", FromName: "alice", ToText: "#general", Delivered: time.Now()}
	paths, err := m.Write(it)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if ok, err := Complete(paths[0]); err != nil || !ok {
		t.Fatalf("Complete(whole file) = %v, %v", ok, err)
	}
	data, _ := os.ReadFile(paths[0])
	for _, cut := range []int{0, 1, len(data) / 2, len(data) - 5} {
		os.WriteFile(paths[0], data[:cut], 0o644)
		if ok, err := Complete(paths[0]); err != nil || ok {
			t.Fatalf("Complete(file cut at %d of %d) = %v, %v; want false", cut, len(data), ok, err)
		}
	}
	if _, err := Complete(paths[0] + ".gone"); err == nil {
		t.Fatal("Complete of a missing file gave no error")
	}
}

// The mirror keeps the day's index open and remembers inbox directories;
// a person or a script removing either between batches loses nothing.
func TestMirrorSurvivesRemovedIndexAndDirectory(t *testing.T) {
	m, dir := openMirror(t, testConfig())
	defer m.Close()
	day := filepath.Join(dir, "2026-11-21")
	item := func(i int) Item {
		return Item{Env: sign(t, alice, i, proto.ToChannel(chanGeneral), msg("item "+strconv.Itoa(i), nil)),
			Priority: "normal", FromName: "alice", ToText: "#general", Delivered: t0.Add(time.Duration(i) * time.Second)}
	}
	if _, err := m.Write(item(1)); err != nil {
		t.Fatal(err)
	}
	// The index is removed: the next batch starts a new one.
	if err := os.Remove(filepath.Join(day, "index.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Write(item(2)); err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(filepath.Join(day, "index.txt"))
	if err != nil || !strings.Contains(string(idx), "item 2") || strings.Contains(string(idx), "item 1") {
		t.Fatalf("index after removal: %v\n%s", err, idx)
	}
	// The whole day is removed: the next batch makes it again.
	if err := os.RemoveAll(day); err != nil {
		t.Fatal(err)
	}
	paths, err := m.Write(item(3))
	if err != nil || len(paths) != 1 {
		t.Fatalf("write after the day was removed: %v, %v", paths, err)
	}
	idx, err = os.ReadFile(filepath.Join(day, "index.txt"))
	if err != nil || !strings.Contains(string(idx), "item 3") {
		t.Fatalf("index after the day was removed: %v\n%s", err, idx)
	}
	// Appends to a kept index land in the file on disk.
	if _, err := m.Write(item(4), item(5)); err != nil {
		t.Fatal(err)
	}
	idx, _ = os.ReadFile(filepath.Join(day, "index.txt"))
	if n := strings.Count(string(idx), "\n"); n != 3 {
		t.Fatalf("index has %d lines, want 3:\n%s", n, idx)
	}
	verifyTree(t, dir, 3)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestMirrorWritten: Written counts the bytes of the files Write and
// Rewrite put in place, their sizes on disk, and not an item that failed
// to render; the mirror loop counts the mailbox's bytes from it rather
// than a stat per file.
func TestMirrorWritten(t *testing.T) {
	m, _ := openMirror(t, testConfig())
	good := Item{Env: sign(t, alice, 1, proto.ToChannel(chanGeneral), msg("ok", nil))}
	bad := Item{Env: good.Env, ToText: "@bob"} // the wrong sigil for a channel
	other := Item{Env: sign(t, alice, 2, proto.ToChannel(chanGeneral), msg(strings.Repeat("long ", 100), nil))}
	if m.Written() != 0 {
		t.Fatalf("Written %d before any write", m.Written())
	}
	paths, err := m.Write(bad, good, other)
	if err == nil || len(paths) != 2 {
		t.Fatalf("paths %q, err %v: want two files and an error", paths, err)
	}
	var sum int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sum += fi.Size()
	}
	if m.Written() != sum {
		t.Fatalf("Written %d, the files hold %d bytes", m.Written(), sum)
	}
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	again, err := m.Rewrite(other)
	if err != nil || len(again) != 1 {
		t.Fatalf("Rewrite: %q, %v", again, err)
	}
	fi, err := os.Stat(again[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Written() != sum+fi.Size() {
		t.Fatalf("Written %d after the rewrite, want %d", m.Written(), sum+fi.Size())
	}
}
