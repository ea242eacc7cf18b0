package mdns

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

// checkNoLeaks fails t if goroutines of this package or of hashicorp/mdns
// outlive the test. It polls, because the library's goroutines exit shortly
// after their sockets close rather than before Close returns.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if leaked := waitNoLeaks(3 * time.Second); leaked != "" {
			t.Errorf("goroutines leaked:\n%s", leaked)
		}
	})
}

// waitNoLeaks returns the stacks of leftover goroutines, or "" once there
// are none.
func waitNoLeaks(limit time.Duration) string {
	var leaked string
	testwait.Until(limit, func() bool { leaked = leakedGoroutines(); return leaked == "" })
	return leaked
}

func leakedGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the calling goroutine
		}
		if strings.Contains(g, "github.com/hashicorp/mdns.") || strings.Contains(g, "github.com/meshd/meshd/transport/mdns.(*") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}

func memPeer(seed byte, org string) Peer {
	return Peer{Key: testKey(seed), Org: org, ProtoVersion: proto.ProtocolVersion,
		Addrs: []string{fmt.Sprintf("tcp://10.0.0.%d:7000", seed)}, Host: "h.local."}
}

// collect reads from d until it has seen want (by key) or the time is up.
func collect(t *testing.T, d Discovery, want map[proto.PubKey]bool, limit time.Duration) map[proto.PubKey]Peer {
	t.Helper()
	got := map[proto.PubKey]Peer{}
	timeout := time.After(limit)
	for len(got) < len(want) {
		select {
		case p, ok := <-d.Peers():
			if !ok {
				t.Fatal("Peers closed early")
			}
			if !want[p.Key] {
				t.Fatalf("unexpected peer %s (org %s)", p.Key.Fingerprint(), p.Org)
			}
			got[p.Key] = p
		case <-timeout:
			t.Fatalf("after %v saw %d of %d peers", limit, len(got), len(want))
		}
	}
	return got
}

// quiet checks that d reports nothing for a while.
func quiet(t *testing.T, d Discovery, d0 time.Duration) {
	t.Helper()
	select {
	case p := <-d.Peers():
		t.Fatalf("unexpected report of %s (org %s, rv %d)", p.Key.Fingerprint(), p.Org, p.RosterVersion)
	case <-time.After(d0):
	}
}

func TestMemoryMembersSeeEachOther(t *testing.T) {
	checkNoLeaks(t)
	hub := NewMemory()
	a := hub.Join(memPeer(1, "acme"))
	defer a.Close()
	b := hub.Join(memPeer(2, "acme"))
	defer b.Close()
	other := hub.Join(memPeer(9, "other"))
	defer other.Close()
	c := hub.Join(memPeer(3, "acme"))
	defer c.Close()

	keys := func(seeds ...byte) map[proto.PubKey]bool {
		m := map[proto.PubKey]bool{}
		for _, s := range seeds {
			m[testKey(s)] = true
		}
		return m
	}
	got := collect(t, a, keys(2, 3), 5*time.Second)
	if p := got[testKey(2)]; p.Org != "acme" || p.Addrs[0] != "tcp://10.0.0.2:7000" || p.Seen.IsZero() {
		t.Errorf("a saw b as %+v", p)
	}
	collect(t, b, keys(1, 3), 5*time.Second)
	collect(t, c, keys(1, 2), 5*time.Second)
	quiet(t, other, 50*time.Millisecond)
	quiet(t, a, 50*time.Millisecond)

	if err := b.SetRosterVersion(4); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*MemoryMember{a, c} {
		if p := collect(t, m, keys(2), 5*time.Second)[testKey(2)]; p.RosterVersion != 4 {
			t.Errorf("rv %d after SetRosterVersion(4)", p.RosterVersion)
		}
	}
	quiet(t, b, 50*time.Millisecond)
	quiet(t, other, 50*time.Millisecond)

	// A member that leaves is not announced; one that joins later sees
	// only those still there.
	c.Close()
	d := hub.Join(memPeer(4, "acme"))
	defer d.Close()
	collect(t, d, keys(1, 2), 5*time.Second)
	quiet(t, d, 50*time.Millisecond)
}

func TestMemoryCoalescesUnreadReports(t *testing.T) {
	checkNoLeaks(t)
	hub := NewMemory()
	a := hub.Join(memPeer(1, "acme"))
	defer a.Close()
	// More peers than the channel holds, and many updates, while a reads
	// nothing: all arrive, each peer once with its newest state.
	const n = peersBuffer + 20
	var members []*MemoryMember
	for i := range n {
		m := hub.Join(Peer{Key: testKey(byte(10 + i)), Org: "acme"})
		defer m.Close()
		members = append(members, m)
	}
	for v := uint64(1); v <= 5; v++ {
		for _, m := range members {
			m.SetRosterVersion(v)
		}
	}
	// The deliverer fills the channel before a reads.
	testwait.For(t, 5*time.Second, "a's channel of peers full", func() bool { return len(a.Peers()) == cap(a.Peers()) })
	seen := map[proto.PubKey]uint64{}
	timeout := time.After(5 * time.Second)
	for len(seen) < n || !allAt(seen, 5) {
		select {
		case p := <-a.Peers():
			seen[p.Key] = p.RosterVersion
		case <-timeout:
			t.Fatalf("saw %d of %d peers", len(seen), n)
		}
	}
}

func allAt(m map[proto.PubKey]uint64, v uint64) bool {
	for _, got := range m {
		if got != v {
			return false
		}
	}
	return true
}

func TestMemoryClose(t *testing.T) {
	checkNoLeaks(t)
	hub := NewMemory()
	a := hub.Join(memPeer(1, "acme"))
	b := hub.Join(memPeer(2, "acme"))
	defer b.Close()
	// Close with an unread report pending, twice, concurrently.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for range a.Peers() {
		// Drains what was buffered; the range ends because Close closed it.
	}
	if err := a.SetRosterVersion(1); err != ErrClosed {
		t.Fatalf("SetRosterVersion after Close: %v, want ErrClosed", err)
	}
	// b is not told about anything by a's leaving or later calls.
	collect(t, b, map[proto.PubKey]bool{testKey(1): true}, 5*time.Second)
	quiet(t, b, 50*time.Millisecond)
}

func TestMemoryReportsAreCopies(t *testing.T) {
	t.Parallel()
	hub := NewMemory()
	self := memPeer(1, "acme")
	a := hub.Join(self)
	defer a.Close()
	self.Addrs[0] = "tcp://mutated:1"
	b := hub.Join(memPeer(2, "acme"))
	defer b.Close()
	p := collect(t, b, map[proto.PubKey]bool{testKey(1): true}, 5*time.Second)[testKey(1)]
	if p.Addrs[0] != "tcp://10.0.0.1:7000" {
		t.Fatalf("Join kept the caller's slice: %q", p.Addrs)
	}
}
