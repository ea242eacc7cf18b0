package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDamagedRosterHint: a roster file cut short is named, and the hint
// says how to replace it.
func TestDamagedRosterHint(t *testing.T) {
	t.Parallel()
	h := filepath.Join(t.TempDir(), "a")
	ok(t, "--home", h, "init", "--name", "a")
	ok(t, "--home", h, "roster", "init", "--org", "acme")
	path := filepath.Join(h, "roster.cbor")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, []string{"--home", h, "roster", "show"}, path, "hint: the file is damaged", "--roster FILE")
	fails(t, 1, []string{"--home", h, "roster", "add", "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "--role", "member"}, "hint: the file is damaged")
}
