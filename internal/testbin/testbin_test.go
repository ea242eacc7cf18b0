package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// module writes a module with one command, cmd/hi, and points the
// user's cache at a directory of the test's.
func module(t *testing.T) (root, cache string) {
	t.Helper()
	root, cache = t.TempDir(), t.TempDir()
	// go build keeps its own cache where it was: the stdlib is not
	// compiled again.
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Skip("no go tool:", err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", cache) // Linux and BSDs
	t.Setenv("HOME", cache)           // macOS: $HOME/Library/Caches
	t.Setenv("LocalAppData", cache)   // Windows
	files := map[string]string{
		"go.mod":       "module example.com/m\n\ngo 1.24\n",
		"cmd/hi/hi.go": "package main\n\nfunc main() { println(\"hi\") }\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, cache
}

func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// TestBuildKeepsCacheDir: Build puts the binaries in the user's cache,
// in the same directory each time (where go build finds them up to
// date), and its cleanup leaves them there.
func TestBuildKeepsCacheDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	root, cache := module(t)
	dir, cleanup, err := Build(root, "./cmd/hi")
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if !strings.HasPrefix(dir, cache) {
		t.Fatalf("built in %s, not in the user's cache %s", dir, cache)
	}
	again, cleanup, err := Build(root, "./cmd/hi")
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if again != dir {
		t.Fatalf("second build in %s, first in %s", again, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, exe("hi"))); err != nil {
		t.Fatal(err)
	}
}

// TestBuildFallsBack: when the cache cannot hold them, the binaries go
// to a directory of the run's own, which cleanup removes.
func TestBuildFallsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	root, cache := module(t)
	// The cache's directory for the binaries is a file: MkdirAll fails.
	c, err := os.UserCacheDir() // under cache, as module set it
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c, "meshd-test-bin"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, cleanup, err := Build(root, "./cmd/hi")
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(dir, cache) {
		t.Fatalf("built in %s, inside the broken cache", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, exe("hi"))); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cleanup left %s (%v)", dir, err)
	}
}

// TestBuildPrunesStale: a checkout's binaries unused for longer than
// staleAfter are removed when another checkout builds; recent ones stay.
func TestBuildPrunesStale(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	root, _ := module(t)
	dir, cleanup, err := Build(root, "./cmd/hi")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	parent := filepath.Dir(dir)
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(p, "meshd")
		if err := os.WriteFile(f, []byte("old build"), 0o700); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		for _, x := range []string{f, p} {
			if err := os.Chtimes(x, at, at); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	stale, recent := mk("stale", staleAfter+time.Hour), mk("recent", time.Hour)
	if _, _, err := Build(root, "./cmd/hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s, unused for longer than %v, is still there (%v)", stale, staleAfter, err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("%s, used an hour ago, was removed: %v", recent, err)
	}
	if _, err := os.Stat(filepath.Join(dir, exe("hi"))); err != nil {
		t.Errorf("this checkout's binary: %v", err)
	}
}
