//go:build linux

package main

import (
	"bufio"
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

// TestAttachmentEventStreamPaths: an agent following the event stream
// with 'meshctl tail --json' learns where a DM's attachments are: first
// the item (no paths yet, the fetch has not run), then an "attachments"
// line naming each file's local path once it is in the mailbox, and the
// files at those paths match their signed hashes.
func TestAttachmentEventStreamPaths(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	dir := t.TempDir()
	file1, data1 := randomFile(t, dir, "change.patch", 300<<10, 21)
	file2, data2 := randomFile(t, dir, "test.log", 1000, 22)

	tail := exec.Command(m.meshctl, "--home", m.homes[1], "--json", "tail")
	ownGroup(tail)
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(tail); _ = tail.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The stream counts as a client waiting on the inbox once open.
	waitFor(t, "bob's tail subscribed", 15*time.Second, func() bool {
		var p api.Presence
		if err := json.Unmarshal([]byte(m.ctl(1, "presence", "--json")), &p); err != nil {
			t.Fatal(err)
		}
		return p.Agent != nil && p.Agent.Waiting > 0
	})
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("meshctl tail ended")
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("no line from meshctl tail within 30s")
		}
		return ""
	}

	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "please review", "--attach", file1, "--attach", file2)
	var item api.Item
	if err := json.Unmarshal([]byte(next()), &item); err != nil || item.ID != sent.ID || item.Kind != "message" {
		t.Fatalf("tail line for the DM: %+v, %v", item, err)
	}
	var ready api.AttachmentsReady
	for ready.ID == "" || !allPaths(ready.Attachments) {
		if err := json.Unmarshal([]byte(next()), &ready); err != nil || ready.Kind != "attachments" || ready.ID != sent.ID {
			t.Fatalf("tail line after the DM: %+v, %v", ready, err)
		}
	}
	if ready.From.Name != "alice" || len(ready.Attachments) != 2 {
		t.Fatalf("attachments event %+v", ready)
	}
	want := map[string][]byte{"change.patch": data1, "test.log": data2}
	for _, a := range ready.Attachments {
		got, err := os.ReadFile(a.Path)
		if err != nil || sha(got) != sha(want[a.Name]) || a.SHA256 != sha(want[a.Name]) {
			t.Fatalf("%s at %s: %v, sha256 %s, want %s", a.Name, a.Path, err, sha(got), sha(want[a.Name]))
		}
		if !strings.HasPrefix(a.Path, filepath.Join(m.homes[1], "mailbox")+string(filepath.Separator)) {
			t.Fatalf("%s is not in bob's mailbox", a.Path)
		}
	}
}

func allPaths(as []api.Attachment) bool {
	for _, a := range as {
		if a.Path == "" {
			return false
		}
	}
	return len(as) > 0
}
