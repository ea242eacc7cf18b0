//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// TestOutboxSpecialFiles: a FIFO, a symbolic link and a directory dropped
// in a real meshd's outbox under ".txt" names go to failed/ with a reason
// that names what they are, a regular file after them is still sent, and
// SIGTERM ends the process within a few seconds. (A FIFO used to block the
// outbox forever, and with it the shutdown.)
func TestOutboxSpecialFiles(t *testing.T) {
	testpar.Parallel(t)
	meshctl, homes, ds, _, _ := twoNodes(t)
	outbox := filepath.Join(homes["alice"], "mailbox", "outbox")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("To: @bob\n---\nnot through a link\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(outbox, "a-fifo.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(outbox, "b-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outbox, "c-dir.txt"), 0o700); err != nil {
		t.Fatal(err)
	}
	draft := filepath.Join(outbox, ".draft")
	if err := os.WriteFile(draft, []byte("To: @bob\n---\nafter the odd ones\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(draft, filepath.Join(outbox, "d-note.txt")); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(homes["alice"], "mailbox", "failed")
	for name, kind := range map[string]string{"a-fifo.txt": "a FIFO", "b-link.txt": "a symbolic link", "c-dir.txt": "a directory"} {
		errFile := filepath.Join(failed, name+".error")
		// The entry and its .error file reach failed/ one after the other.
		waitUntil(t, 10*time.Second, name+" and "+errFile+" in failed/", func() bool {
			_, err := os.Stat(errFile)
			_, lerr := os.Lstat(filepath.Join(failed, name))
			return err == nil && lerr == nil
		})
		b, _ := os.ReadFile(errFile)
		if !strings.Contains(string(b), "not a regular file") || !strings.Contains(string(b), kind) {
			t.Errorf("%s: %q, want it to name %s", errFile, b, kind)
		}
	}
	waitUntil(t, 10*time.Second, "the regular file sent", func() bool {
		_, err := os.Stat(filepath.Join(homes["alice"], "mailbox", "sent", "d-note.txt"))
		return err == nil
	})
	waitUntil(t, 10*time.Second, "the DM in bob's mailbox", func() bool {
		for _, f := range mirrorFiles(homes["bob"]) {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), "after the odd ones") {
				return true
			}
		}
		return false
	})
	for _, f := range mirrorFiles(homes["bob"]) {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "not through a link") {
			t.Errorf("the link's target was sent: %s", f)
		}
	}
	_ = meshctl

	// A FIFO dropped while meshd runs does not hold up the shutdown.
	if err := syscall.Mkfifo(filepath.Join(outbox, "e-fifo.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the outbox to pick up the FIFO", func() bool {
		_, err := os.Stat(filepath.Join(failed, "e-fifo.txt.error"))
		return err == nil
	})
	start := time.Now()
	if err := ds["alice"].stop(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("meshd took %v to stop after SIGTERM", took)
	}
	if code := ds["alice"].cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
