package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runDemoTest runs meshctl with args in process and fails the test unless
// it exits 0 within 20 s.
func runDemoTest(t *testing.T, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts three nodes; skipped with -short")
	}
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	start := time.Now()
	go func() { done <- run(args, nil, &out, &errb) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("meshctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("meshctl %s still running after 20 s", strings.Join(args, " "))
	}
	t.Logf("meshctl %s took %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
	return out.String()
}

func TestDemo(t *testing.T) {
	t.Parallel()
	out := runDemoTest(t, "demo")
	m := regexp.MustCompile(`with homes under (\S+)\.\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no directory named:\n%s", out)
	}
	dir := m[1]
	for _, want := range []string{
		"== 1. identities and the roster",
		"$ meshctl --home " + dir + "/alice init --name alice",
		"$ meshctl --home " + dir + "/alice roster add ed25519:",
		" --role observer --name carol",
		`roster "demo" version 3`,
		"== 2. three nodes start",
		"--no-mdns --seed tcp://127.0.0.1:",
		"== 3. a full mesh",
		"bob links alice (admin) and carol (observer)",
		"== 4. alice creates #demo",
		"$ meshctl --home " + dir + "/alice channel create demo",
		"$ meshctl --home " + dir + "/carol subscribe demo",
		"== 5. alice sends to #demo",
		"$ meshctl --home " + dir + "/alice send '#demo' 'hello, mesh'",
		"to #demo (2 peers)",
		"#demo alice id=",
		"== 6. carol is an observer",
		"meshctl: role too low",
		"== 7. alice sends bob a direct message",
		"$ meshctl --home " + dir + "/alice dm bob 'hi bob, the tests are red again'",
		"dm from alice (",
		"== 8. a request",
		"$ meshctl --home " + dir + "/alice request bob run-tests --params '{\"branch\": \"main\"}'",
		"request from alice (",
		"intent=run-tests hop=0",
		" completed --result '{\"passed\": 412, \"failed\": 0}'",
		"response from bob (",
		"status=completed",
		"== 9. the mailbox",
		"$ ls " + dir + "/bob/mailbox/*/inbox/\n",
		"== 10. verify a mailbox file offline",
		"done in ",
		"closed the three nodes and removed " + dir + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The mirror and verify may not be there yet; each step says which.
	if !strings.Contains(out, "/mailbox/") && !strings.Contains(out, "the mailbox mirror is not enabled") {
		t.Errorf("the mailbox step says nothing")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("demo left %s behind: %v", dir, err)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestDemoJSON(t *testing.T) {
	t.Parallel()
	out := runDemoTest(t, "demo", "--json")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines, want 10 steps and done:\n%s", len(lines), out)
	}
	for i, line := range lines[:10] {
		s := decode[demoStep](t, line)
		if s.Step != i+1 || s.Title == "" {
			t.Errorf("line %d: %+v", i, s)
		}
	}
	if s := decode[demoStep](t, lines[4]); len(s.Commands) == 0 || !strings.Contains(s.Commands[0], "send '#demo'") || len(s.Output) < 3 {
		t.Errorf("step 5: %+v", s)
	}
	done := decode[struct {
		Done    bool
		Dir     string
		Removed bool
		Seconds float64
	}](t, lines[10])
	if !done.Done || !done.Removed || done.Seconds <= 0 || done.Seconds > 15 {
		t.Errorf("last line %+v", done)
	}
}

// TestDemoKeep keeps the mesh running, pokes at it with meshctl as the
// demo suggests, and stops it with "Ctrl-C"; --dir is kept.
func TestDemoKeep(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	if testing.Short() {
		t.Skip("starts three nodes; skipped with -short")
	}
	// Not t.TempDir: the control sockets' paths must stay short.
	dir, err := os.MkdirTemp("", "demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := interruptContext
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { interruptContext = old })

	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"demo", "--keep", "--dir", dir}, nil, &out, &out) }()
	out.waitFor(t, "then Ctrl-C here")
	for _, want := range []string{"meshctl --home " + dir + "/carol tail", "meshctl --home " + dir + "/alice wait --timeout 1m"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--keep output lacks %q", want)
		}
	}
	// The mesh is there for meshctl.
	if got := ok(t, "--home", filepath.Join(dir, "bob"), "inbox", "--all"); !strings.Contains(got, "hello, mesh") {
		t.Errorf("bob's inbox:\n%s", got)
	}
	ok(t, "--home", filepath.Join(dir, "alice"), "send", "#demo", "still there?")

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("demo --keep: exit %d\n%s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("demo --keep did not stop on Ctrl-C")
	}
	if !strings.Contains(out.String(), "kept "+dir) {
		t.Errorf("output does not say %s was kept:\n%s", dir, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "alice", "identity.key")); err != nil {
		t.Errorf("--dir not kept: %v", err)
	}
	// A used directory is refused.
	fails(t, 1, []string{"demo", "--dir", dir}, "is not empty", "hint: give a new or empty directory")
}

// TestDemoMailboxVerify checks the demo's last two steps without a
// mailbox mirror: which files it lists, and that it runs the verify
// command of the table when there is one, else says it skipped.
func TestDemoMailboxVerify(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	day := filepath.Join(home, "mailbox", "2026-11-21")
	for name, text := range map[string]string{
		"inbox/120001-aaaaaaaaaaaa.txt": "Kind: message\n---\nhi\n",
		"inbox/120002-bbbbbbbbbbbb.txt": "Kind: request\n---\n{}\n",
		"inbox/.tmp-123":                "half written",
		"index.txt":                     "12:00:01\tnormal\t...\n",
	} {
		p := filepath.Join(day, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := mailboxFiles(home)
	want := []string{filepath.Join(day, "inbox/120001-aaaaaaaaaaaa.txt"), filepath.Join(day, "inbox/120002-bbbbbbbbbbbb.txt")}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mailbox files %q, want %q", files, want)
	}

	bob := &demoNode{name: "bob", home: home}
	var got []string
	verify := &command{name: "verify", usage: "usage: meshctl verify FILE\n", run: runs(func(a *app, _ *noFlags, args []string) error {
		got = append([]string{a.homeFlag}, args...)
		fmt.Fprintln(a.Stdout, "verified: signature good")
		return nil
	})}
	for _, tc := range []struct {
		table []*command
		files map[string][]string
		want  string
	}{
		{[]*command{verify}, map[string][]string{"bob": files}, "verified: signature good"},
		{[]*command{verify}, nil, "skipped: there is no mailbox file to verify"},
		{nil, map[string][]string{"bob": files}, "skipped: this meshctl has no verify command yet"},
	} {
		var out bytes.Buffer
		got = nil
		p := &demoPrinter{a: &app{Stdout: &out, commands: tc.table}, home: func(string) string { return home }}
		p.verify(bob, tc.files)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("verify step: %q lacks %q", out.String(), tc.want)
		}
		if tc.want == "verified: signature good" {
			// The request's file, checked against bob's home.
			if len(got) != 2 || got[0] != home || got[1] != want[1] {
				t.Errorf("verify ran with %q", got)
			}
			if !strings.Contains(out.String(), "$ meshctl --home "+home+" verify "+want[1]) {
				t.Errorf("verify step does not show the command: %q", out.String())
			}
		}
	}
}

// TestLsInboxesPastes: the ls line the demo prints lists the inbox files
// when run by a shell, even for a home whose path needs quoting.
func TestLsInboxesPastes(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "a home's dir")
	inbox := filepath.Join(home, "mailbox", "2026-11-24", "inbox")
	if err := os.MkdirAll(inbox, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inbox, "120001-aaaaaaaaaaaa.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", lsInboxes(home)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "120001-aaaaaaaaaaaa.txt") {
		t.Fatalf("%s: %v\n%s", lsInboxes(home), err, out)
	}
}
