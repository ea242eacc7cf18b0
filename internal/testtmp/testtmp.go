// Package testtmp puts a test process's temporary directories (t.TempDir,
// os.MkdirTemp("", ...), and those of the daemons it starts) on a memory
// file system when the machine has one with room. The tests write and
// remove tens of thousands of small files (homes, stores, mailboxes); on
// a disk that discards on delete, removing one test's mailbox took longer
// than the test (37 s after a 20 s flood), and each fsync waits for the
// disk. The tests kill daemons, never the machine, so what a crash test
// finds on the file system is the same either way: the page cache
// outlives a killed process. It imports nothing from the project.
package testtmp

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// EnvDir names the directory the tests' temporary files go in, when set;
// MESHD_TEST_TMPDIR=/tmp keeps them on the disk.
const EnvDir = "MESHD_TEST_TMPDIR"

// MinFree is the room a memory file system must have left to be used:
// a package's tests hold a few hundred MiB at once, and the memory is
// shared with everything else on the machine.
const MinFree = 4 << 30

// Use sets TMPDIR for this process and the processes it starts, and
// returns the directory in force. In order: EnvDir when set; TMPDIR when
// the environment sets it; a memory file system with MinFree bytes free
// (Linux's /dev/shm); else the system's default. Measurements keep the
// default: a benchmark (-test.bench) or a run with a MESHD_BENCH* or
// MESHD_SCALE* variable set, whose figures include the disk. Call it
// from TestMain before m.Run, after flag.Parse (testpar.Default parses).
func Use() string {
	if d := os.Getenv(EnvDir); d != "" {
		return set(d)
	}
	if os.Getenv("TMPDIR") != "" || measuring() {
		return os.TempDir()
	}
	if d := memDir(); d != "" {
		return set(d)
	}
	return os.TempDir()
}

func set(d string) string {
	if err := os.Setenv("TMPDIR", d); err != nil {
		return os.TempDir()
	}
	return d
}

// measuring reports whether this run measures something the disk is
// part of.
func measuring() bool {
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "-test.bench="); ok && v != "" {
			return true
		}
	}
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "MESHD_BENCH") || strings.HasPrefix(e, "MESHD_SCALE") {
			return true
		}
	}
	return false
}

// Main is the TestMain of a package whose tests need nothing more: it
// parses the flags (Use asks whether benchmarks run), calls Use and runs
// the tests.
func Main(m *testing.M) {
	flag.Parse()
	Use()
	os.Exit(m.Run())
}
