package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// leftFiles are what belongs to the org a home is in, as opposed to the
// node: moved aside when the node leaves the org (meshctl join, or a
// fresh node adopting an org it knocked at).
var leftFiles = []string{"roster.cbor", "history.db", "invites.json", "seeds", "mailbox", "former-members"}

// LeaveOrg moves the roster, history, invites, seeds and mailbox of org
// into a directory of its own in the home, left-ORG-TIME, and returns its
// path. Nothing is deleted; the identity stays. The caller holds the lock.
func (h Home) LeaveOrg(org string) (string, error) {
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 {
			return '_'
		}
		return r
	}, org)
	dir := filepath.Join(h.Dir, "left-"+safe+"-"+time.Now().UTC().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("leave org %q: %w", org, err)
	}
	for _, name := range leftFiles {
		err := os.Rename(filepath.Join(h.Dir, name), filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("leave org %q: %w", org, err)
		}
	}
	return dir, nil
}

// WriteSeeds writes the seeds file meshd reads at start: addresses it
// dials as static seeds, one a line, under a comment naming who wrote it.
func (h Home) WriteSeeds(by string, seeds []string) error {
	var b strings.Builder
	b.WriteString("# written by " + by + ": addresses meshd dials as static seeds, one a line\n")
	for _, s := range seeds {
		b.WriteString(s + "\n")
	}
	return WriteFileAtomic(h.path("seeds"), []byte(b.String()), 0o600)
}
