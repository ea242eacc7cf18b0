package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// TestSubagentResult: `meshctl post --subagent` puts a subagent_result
// item in bob's own inbox: a running `meshctl wait` wakes on it (high
// priority), the inbox and `meshctl read` show it, the mailbox holds it as
// Kind: subagent_result (and `meshctl verify` accepts the file), and
// alice, linked to bob, never gets it. Bad input is refused with the
// reason.
func TestSubagentResult(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wait := exec.CommandContext(ctx, o.meshctl, "--home", o.homes["bob"], "wait", "--timeout", "50s", "--json")
	wait.Env = cleanEnv()
	var woke bytes.Buffer
	wait.Stdout = &woke
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- wait.Wait() }()
	// The wait is registered once bob's meshd counts a waiting client.
	waitFor(t, "bob's wait registered", 10*time.Second, func() bool {
		var p api.Presence
		if err := json.Unmarshal([]byte(o.ctl("bob", "presence", "--json")), &p); err != nil {
			t.Fatal(err)
		}
		return p.Agent != nil && p.Agent.Waiting > 0
	})

	var posted api.Item
	meshctlJSON(t, o.meshctl, &posted, "--home", o.homes["bob"], "post", "--subagent", "tests-1",
		"--summary", "go test passed <all>", "--result", `{"passed": 412, "failed": 0}`)
	var res map[string]int
	if err := json.Unmarshal(posted.Result, &res); err != nil || res["passed"] != 412 || len(res) != 2 ||
		posted.Kind != "subagent_result" || posted.SubagentID != "tests-1" || posted.Summary != "go test passed <all>" ||
		posted.Priority != "high" || !posted.Wakes {
		t.Fatalf("posted %+v (result %s)", posted, posted.Result)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("meshctl wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subagent result did not wake bob's wait")
	}
	var w api.Inbox
	if err := json.Unmarshal(woke.Bytes(), &w); err != nil || len(w.Items) != 1 || w.Items[0].ID != posted.ID || w.Items[0].Kind != "subagent_result" {
		t.Fatalf("the wait returned %s (%v)", woke.String(), err)
	}
	text := o.ctl("bob", "inbox")
	if !strings.Contains(text, "subagent tests-1 finished") || !strings.Contains(text, `"passed": 412`) {
		t.Fatalf("meshctl inbox shows:\n%s", text)
	}
	var read api.Item
	meshctlJSON(t, o.meshctl, &read, "--home", o.homes["bob"], "read", posted.ID)
	if !read.Read || read.Kind != "subagent_result" {
		t.Fatalf("read %+v", read)
	}

	// The mailbox file, checked offline: read, it moved to read/.
	var file string
	waitFor(t, "the mailbox file of the result", 10*time.Second, func() bool {
		files, _ := filepath.Glob(filepath.Join(o.homes["bob"], "mailbox", "*", "read", "*.txt"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), "Message-ID: "+posted.ID) {
				file = string(b)
				if !strings.Contains(file, "\nKind: subagent_result\n") || !strings.Contains(file, "\nSubagent-ID: tests-1\n") {
					t.Fatalf("mailbox file:\n%s", file)
				}
				if out := o.ctl("bob", "verify", f); !strings.Contains(out, "ok") {
					t.Fatalf("meshctl verify: %s", out)
				}
				return true
			}
		}
		return false
	})

	// Never sent: alice, linked all along, has nothing of it, and bob
	// kept no delivery record for it.
	o.ctl("alice", "dm", "bob", "after the result") // a DM sent after it arrives after it
	waitFor(t, "bob getting alice's DM", 10*time.Second, func() bool { return strings.Contains(o.ctl("bob", "inbox"), "after the result") })
	if out := o.ctl("alice", "inbox", "--all", "--json"); strings.Contains(out, posted.ID) {
		t.Fatalf("alice got bob's subagent result:\n%s", out)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["bob"], "status", posted.ID); r.code == 0 {
		t.Fatalf("bob has a delivery record of its subagent result:\n%s", r.stdout)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--summary", "x"}, "--subagent is required"},
		{[]string{"--subagent", "w"}, "--summary is required"},
		{[]string{"--subagent", "w", "--summary", "x", "--result", "{nope"}, "--result"},
		{[]string{"--subagent", "a\tb", "--summary", "x"}, "without control characters"},
		{[]string{"--subagent", strings.Repeat("w", 129), "--summary", "x"}, "subagent id of 129 bytes: want 1 to 128"},
		{[]string{"--subagent", "w", "--summary", strings.Repeat("s", 8193)}, "summary of 8193 bytes: want 1 to 8192"},
	} {
		r := meshctlRun(t, o.meshctl, append([]string{"--home", o.homes["bob"], "post"}, c.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("post %q: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
