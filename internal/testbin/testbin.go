// Package testbin builds the project's commands for the tests that run
// them as real processes. It imports nothing from the project.
//
// The binaries go to a directory of the user's cache, one per checkout
// and set of packages, where go build finds binaries of the same sources
// up to date and does not link them again: linking meshd and meshctl
// takes 2 s of an idle 2-core machine, more beside other packages'
// builds, and comes before a package's first test can start. If that
// build fails (a binary of other sources that another run is executing
// cannot be replaced), they go to a directory of this run's own. The
// binaries of checkouts unused for two weeks are removed.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Build builds pkgs (paths like "./cmd/meshd", relative to root, the
// module's root) with one go build, which links them in parallel, and
// returns the directory that holds them. cleanup removes the directory
// if it is this run's own; call it when the tests end.
func Build(root string, pkgs ...string) (dir string, cleanup func(), err error) {
	if dir, err := cacheDir(root, pkgs); err == nil && build(root, dir, pkgs) == nil {
		pruneStale(filepath.Dir(dir), dir, time.Now().Add(-staleAfter))
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "meshd-test-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	if err := build(root, tmp, pkgs); err != nil {
		cleanup()
		return "", nil, err
	}
	return tmp, cleanup, nil
}

// staleAfter is how long the binaries of a checkout stay in the cache
// unused (go build touches them each time it finds them up to date):
// each checkout's take about 45 MB, and removed checkouts leave theirs.
const staleAfter = 14 * 24 * time.Hour

// pruneStale removes the directories under parent, other than keep, that
// were, with all their files, last touched before cutoff.
func pruneStale(parent, keep string, cutoff time.Time) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(parent, e.Name())
		if !e.IsDir() || p == keep {
			continue
		}
		files, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		// The directory's own time too: one another run just made is
		// empty until its build ends.
		fi, err := e.Info()
		fresh := err != nil || fi.ModTime().After(cutoff)
		for _, f := range files {
			if fi, err := f.Info(); err != nil || fi.ModTime().After(cutoff) {
				fresh = true
				break
			}
		}
		if !fresh {
			os.RemoveAll(p)
		}
	}
}

// cacheDir returns the cache directory for pkgs built from root.
func cacheDir(root string, pkgs []string) (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root + "\x00" + strings.Join(pkgs, "\x00")))
	dir := filepath.Join(c, "meshd-test-bin", hex.EncodeToString(sum[:8]))
	return dir, os.MkdirAll(dir, 0o700)
}

func build(root, dir string, pkgs []string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}
