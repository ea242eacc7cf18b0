package testtmp

import (
	"os"
	"testing"
)

// TestUse: MESHD_TEST_TMPDIR wins, and TMPDIR follows it for the
// processes the tests start; without it, a TMPDIR the environment sets
// is kept.
func TestUse(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", "")
	t.Setenv(EnvDir, dir)
	if got := Use(); got != dir || os.Getenv("TMPDIR") != dir || os.TempDir() != dir {
		t.Fatalf("Use() = %q, TMPDIR %q; want %q", got, os.Getenv("TMPDIR"), dir)
	}
	other := t.TempDir()
	t.Setenv(EnvDir, "")
	t.Setenv("TMPDIR", other)
	if got := Use(); got != other {
		t.Fatalf("Use() with TMPDIR set = %q, want it kept (%q)", got, other)
	}
}

// TestMeasuringKeepsDisk: a benchmark's temporary files stay where the
// system puts them.
func TestMeasuringKeepsDisk(t *testing.T) {
	t.Setenv("MESHD_BENCH", "1")
	if !measuring() {
		t.Fatal("MESHD_BENCH=1 is not taken as a measurement")
	}
	t.Setenv("MESHD_BENCH", "")
	os.Unsetenv("MESHD_BENCH")
	if measuring() {
		t.Skip("this run has a MESHD_BENCH* or MESHD_SCALE* variable or -test.bench")
	}
}
