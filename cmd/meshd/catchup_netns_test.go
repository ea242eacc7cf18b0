//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// TestPartitionCatchUpOneRound: three hosts on a bridge read #ops, and
// every history page comes after the requester stopped waiting for it
// (sync_timeout 1ms: peers slower to answer than the timeout, as loaded
// hosts are). host2 is cut off from host0 and host1; both sides send to
// #ops, some while the links are still believed up (those bytes are lost
// with the link) and some after the links dropped. Then the network heals
// one pair at a time, as a real one does: host1–host2 first, and host2
// sends on the healed pair, then host0–host2. Every message of both sides
// must reach every host within one catch-up round of the last heal (the
// late pages are used, and paging resumes after them), and no host may
// give up a gap.
func TestPartitionCatchUpOneRound(t *testing.T) {
	testpar.First(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	const n = 3
	nw := netnstest.NewBridge(t, n)
	homes, keys, pinned := multiHostOrg(t, meshctl, n)
	m := &faultMesh{t: t, meshctl: meshctl, homes: homes, keys: keys}
	for i := range n {
		m.names = append(m.names, "host"+strconv.Itoa(i))
	}
	m.cmd = func(i int) *exec.Cmd {
		args := []string{"--home", homes[i], "--roster", pinned, "--listen", "tcp://0.0.0.0:7437", "--no-unix", "--no-mdns",
			"--presence-ttl", "3s", "--keepalive", "500ms", "--idle-timeout", "2s", "--sync-timeout", "1ms", "--log-level", "debug"}
		for j := range n {
			if j != i {
				args = append(args, "--seed", "tcp://"+nw.Host(j).IP.String()+":7437")
			}
		}
		return nw.Host(i).Command(context.Background(), meshd, args...)
	}
	m.startAll(15 * time.Second)
	m.channel("ops")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var all []string
	// Bodies of 150 KB: a page of them takes the serving host milliseconds
	// to read, sign and send, well over the requester's 1 ms wait.
	pad := strings.Repeat("p", 150<<10)
	send := func(host int, what string) {
		t.Helper()
		s, err := m.client(host).Send(ctx, api.Send{To: "#ops", Body: fmt.Sprintf("host%d: %s %s", host, what, pad)})
		if err != nil {
			t.Fatalf("host%d: send: %v", host, err)
		}
		all = append(all, s.ID)
	}
	for i := range n {
		send(i, "before the cut")
	}
	for _, a := range []int{0, 1} {
		if err := nw.Partition(a, 2); err != nil {
			t.Fatal(err)
		}
	}
	cut := time.Now()
	// While the links are believed up: the bytes go nowhere.
	send(0, "just after the cut")
	send(2, "just after the cut")
	waitPeers(t, meshctl, homes[2], 0, 15*time.Second)
	waitPeers(t, meshctl, homes[0], 1, 15*time.Second)
	t.Logf("links across the cut dropped %v after it", time.Since(cut).Round(time.Millisecond))
	for k := range 2 {
		send(0, "during the partition "+strconv.Itoa(k))
		send(1, "during the partition "+strconv.Itoa(k))
		send(2, "during the partition "+strconv.Itoa(k))
	}

	// host1–host2 heal first; host2 speaks on the healed pair.
	if err := nw.Heal(1, 2); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, meshctl, homes[2], 1, 30*time.Second)
	send(2, "after the first heal")
	if err := nw.Heal(0, 2); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	waitPeers(t, meshctl, homes[2], 2, 30*time.Second)
	linked := time.Since(healed)

	missing := 0
	// What the polls saw, for a failure of the bound below: whether the
	// messages came late or the polls themselves did.
	var polls []string
	if !testwait.Until(time.Until(healed.Add(30*time.Second)), func() bool {
		start := time.Now()
		defer func() {
			polls = append(polls, fmt.Sprintf("%v+%v:%d", start.Sub(healed).Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond), missing))
		}()
		missing = 0
		for i := range n {
			got, err := m.historyIDsAPI(i, "ops")
			if err != nil {
				t.Fatalf("host%d: history: %v", i, err)
			}
			for _, id := range all {
				if !got[id] {
					missing++
				}
			}
		}
		return missing == 0
	}) {
		for i := range n {
			got, _ := m.historyIDsAPI(i, "ops")
			t.Logf("host%d holds %d of the %d sent", i, len(got), len(all))
		}
		t.Fatalf("%d messages still missing 30 s after the heal (links back after %v)", missing, linked.Round(time.Millisecond))
	}
	took := time.Since(healed)
	for i := range n {
		c := m.status(i).Counters
		if c["sync.gaps_forgotten"] != 0 {
			t.Errorf("host%d gave up %d gaps", i, c["sync.gaps_forgotten"])
		}
		t.Logf("host%d: sync.rounds %d, sync.timeouts %d, sync.late_pages %d, drop.history_unsolicited %d",
			i, c["sync.rounds"], c["sync.timeouts"], c["sync.late_pages"], c["drop.history_unsolicited"])
	}
	t.Logf("all %d messages on every host %v after the heal (links back after %v)", len(all), took.Round(time.Millisecond), linked.Round(time.Millisecond))
	// One catch-up round: due at the link, run SyncDelay (200 ms) later,
	// each late page making it due again at once; never the next periodic
	// round (SyncInterval, 5 min). 1–4 s here; the bound leaves room for a
	// loaded machine.
	if took-linked > 15*time.Second {
		t.Errorf("caught up %v after the links came back, want within one round (15 s); polls (start after the heal + duration: missing): %v",
			(took - linked).Round(time.Millisecond), polls)
	}
}
