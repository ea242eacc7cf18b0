//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// Agent-loop tests: claims for a pool of workers, inbox filters, reply,
// search, the requests a node sent and conversations, through the real
// binaries.

// unreadCount counts node i's unread items through the control API.
func (m *faultMesh) unreadCount(i int) int {
	m.t.Helper()
	n := 0
	err := m.client(i).InboxPages(context.Background(), api.InboxQuery{Cursor: api.CursorStart}, 10*time.Second, func(in *api.Inbox) error {
		n += len(in.Items)
		return nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return n
}

// waitUnread waits until node i holds want unread items.
func (m *faultMesh) waitUnread(i, want int, within time.Duration) {
	m.t.Helper()
	got := 0
	if !testwait.Until(within, func() bool {
		got = m.unreadCount(i)
		return got == want
	}) {
		m.t.Fatalf("%s holds %d unread items after %v, want %d", m.names[i], got, within, want)
	}
}

// TestClaimRace: alice DMs bob 1,000 times; two workers on bob, each a
// loop of real meshctl processes (inbox --claim 25), race to claim them
// all. No item is taken twice and none is missed. Then a claim held by
// one worker is refused to the other, renewed by its own, released by
// read; an expired lease returns its item to the pool and wakes a
// waiting worker; and respond releases a claimed request and marks it
// read.
func TestClaimRace(t *testing.T) {
	testpar.Parallel(t)
	const total = 1000
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < total; k += 8 {
				if _, err := m.client(0).Send(ctx, api.Send{To: "bob", Body: fmt.Sprintf("job %d", k)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m.waitUnread(1, total, 60*time.Second)

	claimed := make([]map[string]bool, 2)
	var failed []string
	var mu sync.Mutex
	for w := range 2 {
		claimed[w] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cmd := exec.CommandContext(ctx, m.meshctl, "--home", m.homes[1], "inbox", "--claim", "25",
					"--lease", "5m", "--worker", fmt.Sprintf("w%d", w), "--json")
				cmd.Env = cleanEnv()
				out, err := cmd.Output()
				var in api.Inbox
				if err == nil {
					err = json.Unmarshal(out, &in)
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("worker %d: %v", w, err))
					mu.Unlock()
					return
				}
				if len(in.Items) == 0 {
					return
				}
				for _, it := range in.Items {
					if it.Claim == nil || it.Claim.Worker != fmt.Sprintf("w%d", w) {
						mu.Lock()
						failed = append(failed, fmt.Sprintf("worker %d: item %s came with claim %+v", w, it.ID, it.Claim))
						mu.Unlock()
					}
					claimed[w][it.ID] = true
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatal(strings.Join(failed, "\n"))
	}
	for id := range claimed[0] {
		if claimed[1][id] {
			t.Fatalf("item %s was claimed by both workers", id)
		}
	}
	if got := len(claimed[0]) + len(claimed[1]); got != total {
		t.Fatalf("the workers claimed %d + %d items, want %d in all", len(claimed[0]), len(claimed[1]), total)
	}
	t.Logf("worker 0 claimed %d items, worker 1 %d", len(claimed[0]), len(claimed[1]))
	if len(claimed[0]) == 0 || len(claimed[1]) == 0 {
		t.Logf("one worker took every item: the race was not close")
	}

	if out := m.ctl(1, "inbox", "--limit", "1"); !strings.Contains(out, "[claimed by w") {
		t.Fatalf("meshctl inbox does not show the claim:\n%s", out)
	}

	// One item of w0's: w1 is refused, w0 renews, read releases.
	var one string
	for id := range claimed[0] {
		one = id
		break
	}
	r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "claim", one, "--worker", "w1")
	if r.code != 1 || !strings.Contains(r.stderr, `claimed by worker "w0"`) {
		t.Fatalf("w1 claiming w0's item: exit %d, stderr %q", r.code, r.stderr)
	}
	var it api.Item
	meshctlJSON(t, m.meshctl, &it, "--home", m.homes[1], "claim", one, "--worker", "w0", "--lease", "10m")
	if it.Claim == nil || time.Until(it.Claim.Until) < 9*time.Minute {
		t.Fatalf("renewed claim: %+v", it.Claim)
	}
	m.ctl(1, "read", one)
	r = meshctlRun(t, m.meshctl, "--home", m.homes[1], "claim", one, "--worker", "w1")
	if r.code != 1 || !strings.Contains(r.stderr, "read already") {
		t.Fatalf("claiming a read item: exit %d, stderr %q", r.code, r.stderr)
	}

	// An expired lease returns its item to a waiting worker.
	fresh, err := m.client(0).Send(ctx, api.Send{To: "bob", Body: "fresh job"})
	if err != nil {
		t.Fatal(err)
	}
	m.waitUnread(1, total, 30*time.Second) // 1,000 - 1 read + 1 fresh
	var first api.Inbox
	meshctlJSON(t, m.meshctl, &first, "--home", m.homes[1], "inbox", "--claim", "1", "--lease", "1s", "--worker", "w0")
	if len(first.Items) != 1 || first.Items[0].ID != fresh.ID {
		t.Fatalf("w0 claimed %+v, want the fresh item %s", first.Items, fresh.ID)
	}
	start := time.Now()
	var second api.Inbox
	meshctlJSON(t, m.meshctl, &second, "--home", m.homes[1], "inbox", "--claim", "1", "--wait", "--timeout", "20s", "--worker", "w1")
	if len(second.Items) != 1 || second.Items[0].ID != fresh.ID || second.Items[0].Claim.Worker != "w1" {
		t.Fatalf("after w0's lease ended, w1 claimed %+v, want %s", second.Items, fresh.ID)
	}
	t.Logf("w1 took the item %v after w0's 1 s lease", time.Since(start).Round(time.Millisecond))
	r = meshctlRun(t, m.meshctl, "--home", m.homes[1], "inbox", "--claim", "1", "--wait", "--timeout", "1s")
	if r.code != 3 {
		t.Fatalf("claim with nothing left: exit %d (want 3)\n%s%s", r.code, r.stdout, r.stderr)
	}

	// respond releases a claimed request and marks it read.
	rq, err := m.client(0).Request(ctx, api.Request{To: "bob", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}
	var got api.Inbox
	if !testwait.Until(20*time.Second, func() bool {
		meshctlJSON(t, m.meshctl, &got, "--home", m.homes[1], "inbox", "--claim", "1", "--kind", "request", "--worker", "w0")
		return len(got.Items) > 0
	}) {
		t.Fatal("bob never got the request")
	}
	if got.Items[0].RequestID != rq.RequestID {
		t.Fatalf("claimed %+v, want request %s", got.Items[0], rq.RequestID)
	}
	m.ctl(1, "respond", rq.RequestID, "accepted")
	var after api.Inbox
	meshctlJSON(t, m.meshctl, &after, "--home", m.homes[1], "inbox", "--all", "--kind", "request")
	if len(after.Items) != 1 || !after.Items[0].Read || after.Items[0].Claim != nil {
		t.Fatalf("the answered request: %+v, want read and no claim", after.Items)
	}
}
