package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// These tests dial from several loopback addresses (127.0.0.0/8 is all
// local on Linux), so the admin's node sees several sources.

// knocker dials a node as a non-member of its org, from a chosen
// loopback address.
type knocker struct {
	addr string // the node's host:port
	org  string
}

// knock handshakes with key from src and waits for the refusal.
func (k knocker) knock(t *testing.T, src string, key ed25519.PrivateKey, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.DialContext(ctx, "tcp", k.addr)
	if err != nil {
		t.Errorf("dial from %s: %v", src, err)
		return
	}
	l, err := transport.Client(ctx, c, transport.Config{Identity: key, Org: k.org,
		Payload: func() proto.HandshakePayload { return proto.HandshakePayload{Name: name} }}, nil)
	if err != nil {
		c.Close()
		return
	}
	l.Start(func([]byte) {})
	<-l.Done()
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// pendingNames lists the claimed names on the node's pending list.
func pendingNames(t *testing.T, meshctl, h string) map[string]bool {
	t.Helper()
	var p struct{ Nodes []struct{ Name string } }
	meshctlJSON(t, meshctl, &p, "--home", h, "roster", "pending")
	out := map[string]bool{}
	for _, x := range p.Nodes {
		out[x.Name] = true
	}
	return out
}

// startPendingTarget starts an admin's node to knock on.
func startPendingTarget(t *testing.T) (meshctl, home string, k knocker) {
	meshd, meshctl := buildBinaries(t)
	a := filepath.Join(t.TempDir(), "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	sa := waitStatus(t, meshctl, a, da)
	addr, err := transport.ParseAddr(tcpListen(t, sa))
	if err != nil {
		t.Fatal(err)
	}
	return meshctl, a, knocker{addr: addr.Address, org: sa.Org}
}

// TestPendingFloodOneSource: an attacker knocks with 8 fresh keys a
// second from one address, long enough to have drained the old shared
// budget of new entries (60, refilled at 1/s); a newcomer from another
// address then knocks once and is listed. The attacker's address holds
// at most its share of the list.
func TestPendingFloodOneSource(t *testing.T) {
	testpar.First(t)
	meshctl, a, k := startPendingTarget(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(125 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				k.knock(t, "127.0.0.1", newKey(t), fmt.Sprintf("flood%d", i))
				sent.Add(1)
			}()
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	const before = 100 // 12.5 s at 8/s: the old budget (60 + 12) is gone
	waitFor(t, "the flood to pass 100 knocks", 60*time.Second, func() bool { return sent.Load() >= before })
	k.knock(t, "127.0.0.2", newKey(t), "newcomer")
	names := pendingNames(t, meshctl, a)
	flood := 0
	for n := range names {
		if n != "newcomer" {
			flood++
		}
	}
	cs := counters(t, meshctl, a)
	if !names["newcomer"] {
		t.Fatalf("after %d fresh keys from one address, a newcomer from another is not listed (%d listed, counters %v)",
			sent.Load(), len(names), cs)
	}
	if flood > 8 {
		t.Fatalf("one address holds %d entries of the pending list, want at most 8", flood)
	}
	if cs["pending.refused.source_full"] == 0 {
		t.Fatalf("no refusal counted: %v", cs)
	}
	t.Logf("%d fresh keys from one address at 8/s: it holds %d entries, %d refused (source_full); the newcomer from another address is listed",
		sent.Load(), flood, cs["pending.refused.source_full"])
}

// TestPendingRefreshKeepsListed: a newcomer is listed; then an attacker
// with 276 keys from 35 addresses fills the list, refreshes its keys at
// 11 knocks a second and adds 1.5 new keys a second. The full list
// refuses the new keys, and the newcomer stays listed throughout.
func TestPendingRefreshKeepsListed(t *testing.T) {
	testpar.First(t)
	meshctl, a, k := startPendingTarget(t)
	k.knock(t, "127.0.0.2", newKey(t), "newcomer")
	if !pendingNames(t, meshctl, a)["newcomer"] {
		t.Fatal("the newcomer is not listed")
	}
	const keys, sources = 276, 35
	type knocking struct {
		src string
		key ed25519.PrivateKey
	}
	attackers := make([]knocking, keys)
	for i := range attackers {
		attackers[i] = knocking{src: fmt.Sprintf("127.0.1.%d", 10+i%sources), key: newKey(t)}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, x := range attackers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			k.knock(t, x.src, x.key, "attacker")
		}()
	}
	wg.Wait()
	waitCounter(t, meshctl, a, "pending.refused.full", 1)

	// 8 s (20 s with MESHD_BENCH=1) of refreshes at 11/s and new keys at
	// 1.5/s: on a list that evicted, the first new key would take a place.
	refresh := time.NewTicker(time.Second / 11)
	fresh := time.NewTicker(time.Second * 2 / 3)
	defer refresh.Stop()
	defer fresh.Stop()
	end := time.After(window(8*time.Second, 20*time.Second))
	full0 := counters(t, meshctl, a)["pending.refused.full"]
	n, news := 0, 0
loop:
	for {
		select {
		case <-end:
			break loop
		case <-refresh.C:
			x := attackers[n%keys]
			n++
			wg.Add(1)
			go func() { defer wg.Done(); k.knock(t, x.src, x.key, "attacker") }()
		case <-fresh.C:
			news++
			src := fmt.Sprintf("127.0.2.%d", 10+news%sources)
			wg.Add(1)
			go func() { defer wg.Done(); k.knock(t, src, newKey(t), "attacker-new") }()
		}
	}
	wg.Wait()
	var p struct{ Nodes []struct{ Name string } }
	meshctlJSON(t, meshctl, &p, "--home", a, "roster", "pending")
	names := pendingNames(t, meshctl, a)
	cs := counters(t, meshctl, a)
	if !names["newcomer"] || names["attacker-new"] {
		t.Fatalf("after %d refreshes and %d new keys: newcomer listed %v, a new key listed %v (counters %v)",
			n, news, names["newcomer"], names["attacker-new"], cs)
	}
	if len(p.Nodes) != 256 || cs["pending.refused.full"] < full0+uint64(news) {
		t.Fatalf("pending holds %d, refused as full %d (was %d, %d new keys)", len(p.Nodes), cs["pending.refused.full"], full0, news)
	}
	t.Logf("%d keys from %d addresses fill the list (256); %d refreshes at 11/s and %d new keys at 1.5/s: the newcomer stays, %d refused as full",
		keys, sources, n, news, cs["pending.refused.full"])
}
