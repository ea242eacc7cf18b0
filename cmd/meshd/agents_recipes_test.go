package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// agentsRecipes returns the lines of docs/AGENTS.md's bash block that
// holds the mailbox recipes (the one that finds requests).
func agentsRecipes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "AGENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```bash\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "Kind: request") && strings.Contains(block, "inbox") {
			return strings.Split(strings.TrimSpace(block), "\n")
		}
	}
	t.Fatal("docs/AGENTS.md has no bash block of mailbox recipes")
	return nil
}

// TestAgentsRecipesScale runs docs/AGENTS.md's mailbox recipes, as
// written, on a mailbox of 100,000 files (today's folder and the one the
// recipes name): each one works, and finds what it should. The glob form
// they replaced is run too, to show that the mailbox is big enough to
// break it ("Argument list too long").
func TestAgentsRecipesScale(t *testing.T) {
	testpar.Parallel(t)
	if testing.Short() {
		t.Skip("writes 100,000 files")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the recipes are for a POSIX shell")
	}
	for _, tool := range []string{"bash", "find", "xargs", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	const files, every = 100_000, 2500
	// tmpfs where there is one: 100,000 files on a shared disk take long.
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	home, err := os.MkdirTemp(base, "agents-recipes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	// Two files, message and request, linked under 100,000 names.
	src := map[string]string{}
	for _, kind := range []string{"message", "request"} {
		src[kind] = filepath.Join(home, kind)
		body := fmt.Sprintf("From: alice (90d0cc6da5681dcc)\nTo: @bob\nKind: %s\n---\nhello\n", kind)
		if err := os.WriteFile(src[kind], []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	days := []string{"2026-11-21", time.Now().UTC().Format(time.DateOnly)}
	start := time.Now()
	requests := 0
	for i := range files {
		dir := filepath.Join(home, "mailbox", days[i%len(days)], "inbox")
		if i < len(days) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("%06d-%012x.txt", i%240000, i)
		if i == 0 {
			name = "120001-06222cd7c90a.txt" // the file the recipes cat
		}
		kind := "message"
		if i%every == 1 {
			kind = "request"
			requests++
		}
		if err := os.Link(src[kind], filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("mailbox of %d files made in %v", files, time.Since(start).Round(time.Millisecond))

	run := func(line string) (stdout, stderr string, err error) {
		// A bound for a hung recipe, not a speed asked of it: it runs
		// beside other tests (awk reads 100,000 files in some 20 s alone).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
		cmd.Env = append(cleanEnv(), "MESH_HOME="+home)
		cmd.WaitDelay = time.Second
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err = cmd.Run()
		return out.String(), errb.String(), err
	}
	for _, line := range agentsRecipes(t) {
		start := time.Now()
		stdout, stderr, err := run(line)
		if err != nil {
			t.Fatalf("recipe %q failed on %d files: %v\n%s", line, files, err, stderr)
		}
		t.Logf("%q: %d lines in %v", line, strings.Count(stdout, "\n"), time.Since(start).Round(time.Millisecond))
		if strings.Contains(line, "Kind: request") {
			if n := strings.Count(stdout, "\n"); n != requests {
				t.Fatalf("recipe %q listed %d files, want the %d requests", line, n, requests)
			}
		}
	}
	_, stderr, err := run(`grep -l '^Kind: request' "$MESH_HOME"/mailbox/*/inbox/*.txt`)
	if err == nil || !strings.Contains(stderr, "Argument list too long") {
		t.Logf("the glob form worked here (err %v): this system's argument list is larger than usual", err)
	}
}
