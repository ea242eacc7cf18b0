package node

import (
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/internal/bubble"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/memnet"
)

// Nodes in a synctest bubble, linked over the in-memory network
// (transport/memnet): no socket, so the bubble's clock runs whenever
// every node waits, and a test asserts when things happen on the
// node's own timers. What a node must leave out to run in a bubble:
// mDNS (multicast sockets), the outbox's fsnotify watch (a goroutine
// reading the inotify descriptor; Config.OutboxNoNotify) and the
// control server's Unix socket (closed at once by bubbleNode). bbolt's
// and the mailbox's file I/O are system calls that return, so they stay.

// bubbleNode starts node i of m inside the calling bubble, on host
// 192.0.2.(i+1) of nw, listening on port 7946 there, seeded with seeds.
func bubbleNode(t *testing.T, m *testMesh, nw *memnet.Network, i int, seeds ...transport.Addr) *Node {
	t.Helper()
	return bubbleNodeWith(t, m, nw, i, nil, seeds...)
}

// bubbleNodeWith is bubbleNode with the configuration changed by tweak
// (nil: none).
func bubbleNodeWith(t *testing.T, m *testMesh, nw *memnet.Network, i int, tweak func(*Config), seeds ...transport.Addr) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Home = m.home(i)
	cfg.MDNS = false
	cfg.OutboxNoNotify = true
	cfg.Transport.Net = nw.Host(bubbleIP(i))
	cfg.Listen = []transport.Addr{bubbleAddr(i)}
	cfg.Seeds = seeds
	cfg.Logger = testLogger(t)
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("start node %d: %v", i, err)
	}
	// No control server: it listens on a Unix socket of the host, and a
	// goroutine blocked in its accept would keep the clock still (New
	// does not start one; cmd/meshd and newTestNode do).
	t.Cleanup(func() { n.Close() })
	return n
}

func bubbleIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}) }

func bubbleAddr(i int) transport.Addr {
	return transport.Addr{Network: "tcp", Address: fmt.Sprintf("%s:7946", bubbleIP(i))}
}

// bubbleWaitFor steps the bubble's clock until cond holds, failing after
// limit of it; it returns how long that took on the clock.
func bubbleWaitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		bubble.Advance(10 * time.Millisecond) // a step of the bubble's clock
	}
}

// nextItem returns the next inbox item of a SubscribeItems channel,
// failing after limit of the bubble's clock.
func nextItem(t *testing.T, items <-chan api.Delivered, limit time.Duration, what string) api.Item {
	t.Helper()
	select {
	case d := <-items:
		return d.Item()
	case <-time.After(limit):
		t.Fatalf("%s: nothing within %v", what, limit)
	}
	return api.Item{}
}

// TestSynctestMeshOverMemnet: three nodes, each seeded with the first,
// form a full mesh over the memory network (the third links the second
// through peer exchange) and deliver a DM and a channel message, all in
// a bubble. Its clock says the mesh forms one peer-exchange batch after
// the seeds linked, within the first-dial spread, and that a message
// arrives in the instant it is sent: no timer stands in its way.
func TestSynctestMeshOverMemnet(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	for i := range 3 {
		m.writeRoster(i, m.roster)
	}
	synctest.Test(t, func(t *testing.T) {
		// b is the one of the two members whose NodeID is lower: its link
		// to c wins the duplicate rule, so c puts off its own first dial
		// past the spread and the lead (peers.FirstDialDelay).
		bi, ci := 1, 2
		if m.ids[2].Pub.NodeID().Less(m.ids[1].Pub.NodeID()) {
			bi, ci = 2, 1
		}
		nw := memnet.New()
		start := time.Now()
		a := bubbleNode(t, m, nw, 0)
		b := bubbleNode(t, m, nw, bi, bubbleAddr(0))
		// c starts once b is linked, so that a's opening peer list to c
		// names b while b hears of c only from a's batched changes.
		bubbleWaitFor(t, time.Second, "b linked to a", func() bool { return linked(a, m.ids[bi].Pub) && linked(b, m.ids[0].Pub) })
		c := bubbleNode(t, m, nw, ci, bubbleAddr(0))
		nodes := map[int]*Node{0: a, bi: b, ci: c}
		bubbleWaitFor(t, time.Minute, "full mesh", func() bool {
			for i, n := range nodes {
				for j := range nodes {
					if i != j && !linked(n, m.ids[j].Pub) {
						return false
					}
				}
			}
			return true
		})
		took := time.Since(start)
		// Seeds are dialled at once. c, linking a after b, hears of b in
		// a's opening peer list; b hears of c from a's peer-list changes,
		// which a batches for peers.ExchangeBatch after its link to c came
		// up; b then dials c within the first-dial spread. The clock
		// steps by 10 ms.
		lo, hi := peers.ExchangeBatch, peers.ExchangeBatch+peers.DialSpread(3)+10*time.Millisecond
		if took < lo || took > hi {
			t.Errorf("the mesh took %v of the clock to form, want within [%v, %v]", took, lo, hi)
		}
		for _, p := range newStatus(b).PeerList() {
			if p.Key.Equal(m.ids[0].Pub) && p.Address != bubbleAddr(0).Address {
				t.Errorf("b's link to a runs from %s, want %s", p.Address, bubbleAddr(0).Address)
			}
		}

		bItems, _, bStop := b.q.SubscribeItems()
		defer bStop()
		cItems, _, cStop := c.q.SubscribeItems()
		defer cStop()
		sent, err := a.out.Send(api.Send{To: string(rune('a' + ci)), Body: "over memory"})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		it := nextItem(t, cItems, time.Minute, "the DM at c")
		if it.ID != sent.ID || it.Body != "over memory" || it.From.Name != "a" {
			t.Fatalf("c got %+v, want a's DM %s", it, sent.ID)
		}
		if d := time.Since(at); d != 0 {
			t.Errorf("the DM took %v of the clock", d)
		}

		// The admin creates a channel; its policy spreads over the links.
		if _, err := a.chans.CreateChannel(api.CreateChannel{Name: "general"}); err != nil {
			t.Fatal(err)
		}
		bubbleWaitFor(t, time.Minute, "the channel's policy at b and c", func() bool {
			_, errB := b.chans.Resolve("general")
			_, errC := c.chans.Resolve("general")
			return errB == nil && errC == nil
		})
		for _, n := range []*Node{b, c} {
			if _, err := n.chans.SetSubscription("general", "subscribed"); err != nil {
				t.Fatal(err)
			}
		}
		sent, err = b.out.Send(api.Send{To: "#general", Body: "to everyone"})
		at = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if it := nextItem(t, cItems, time.Minute, "the channel message at c"); it.ID != sent.ID || it.Channel != "general" {
			t.Fatalf("c got %+v, want b's channel message %s", it, sent.ID)
		}
		if d := time.Since(at); d != 0 {
			t.Errorf("the channel message took %v of the clock", d)
		}
		select {
		case d := <-bItems:
			t.Fatalf("b got an item of its own: %+v", d.Item())
		default:
		}
	})
}

// TestSynctestSilentMemberOffline: the way between two linked nodes is
// cut (memnet.Cut, a pulled cable: nothing arrives, no close is seen).
// On the bubble's clock each end closes its link by its idle timeout,
// within [idle, idle + 2 slack] of the last thing it received; the
// member is counted offline by the presence expiry check that first
// finds it silent for longer than presence_ttl, to the nanosecond; once
// the way heals, the nodes link again within a dial timeout and the
// longest backoff, and the member is online again.
func TestSynctestSilentMemberOffline(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		t0 := time.Now() // a's presence checks tick from here
		a := bubbleNode(t, m, nw, 0)
		b := bubbleNode(t, m, nw, 1, bubbleAddr(0))
		bKey := m.ids[1].Pub
		bubbleWaitFor(t, time.Minute, "link", func() bool { return linked(a, bKey) && linked(b, m.ids[0].Pub) })
		a.peers.Lock()
		pl := a.peers.LinkedLocked(bKey)
		a.peers.Unlock()

		nw.Cut(bubbleIP(0), bubbleIP(1))
		lastRecv := pl.Conn.LastRecv()
		down := bubbleWaitFor(t, 5*time.Minute, "a's link down", func() bool { return !linked(a, bKey) })
		idle := DefaultConfig().Transport.IdleTimeout
		if idle == 0 {
			idle = transport.DefaultConfig().IdleTimeout
		}
		downAt := time.Now()
		if d := downAt.Sub(lastRecv); d < idle || d > idle+idle/8+10*time.Millisecond {
			t.Errorf("link closed %v after its last message (%v after the cut), want within [%v, %v]", d, down, idle, idle+idle/8)
		}

		e, ok := a.own.Table().Get(bKey, time.Now())
		if !ok || e.State != proto.Online {
			t.Fatalf("b at a after its link went down: %+v, want online until the TTL", e)
		}
		ttl := a.cfg.PresenceTTL
		check := min(ttl/4, 2*time.Second)
		ticks := (e.LastHeard.Add(ttl).Sub(t0))/check + 1
		expiry := t0.Add(ticks * check) // the first check that finds it silent for longer than ttl
		bubble.Advance(time.Until(expiry) - time.Nanosecond)
		synctest.Wait()
		if n := a.metrics.Get("presence.expired"); n != 0 {
			t.Fatalf("b counted expired %v after it was last heard, before the check due at %v", time.Since(e.LastHeard), expiry.Sub(e.LastHeard))
		}
		bubble.Advance(time.Nanosecond)
		synctest.Wait()
		if n := a.metrics.Get("presence.expired"); n != 1 {
			t.Fatalf("b counted expired %d times at the check due %v after it was last heard, want once", n, expiry.Sub(e.LastHeard))
		}
		if e, _ := a.own.Table().Get(bKey, time.Now()); e.State != proto.Offline {
			t.Fatalf("b shown %v after the TTL", e.State)
		}

		nw.Heal(bubbleIP(0), bubbleIP(1))
		limit := a.cfg.DialTimeout + a.cfg.DialBackoffMax
		bubbleWaitFor(t, limit, "relinked and b online again", func() bool {
			e, _ := a.own.Table().Get(bKey, time.Now())
			return linked(a, bKey) && e.State == proto.Online
		})
	})
}

// TestSynctestDirectRetention: a DM is kept for DirectRetention and
// removed, with its mailbox file, by the first retention pass after
// that: passes run 5 s after the start, then every RetentionInterval
// from it, and the one before the due pass keeps it.
func TestSynctestDirectRetention(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		t0 := time.Now() // b's retention passes count from here
		a := bubbleNode(t, m, nw, 0)
		b := bubbleNodeWith(t, m, nw, 1, func(c *Config) { c.DirectRetention = time.Hour }, bubbleAddr(0))
		bubbleWaitFor(t, time.Minute, "link", func() bool { return linked(a, m.ids[1].Pub) })
		items, _, stop := b.q.SubscribeItems()
		defer stop()
		if _, err := a.out.Send(api.Send{To: "b", Body: "kept for an hour"}); err != nil {
			t.Fatal(err)
		}
		sentMs := time.Now().UnixMilli()
		nextItem(t, items, time.Minute, "the DM at b")
		bubbleWaitFor(t, time.Minute, "the DM's mailbox file", func() bool { return len(mailboxFiles(t, m.home(1))) == 1 })

		// The first pass whose cutoff (its time less the retention, in
		// milliseconds) is past the DM's.
		iv, keep := b.cfg.RetentionInterval, b.cfg.DirectRetention
		due := t0.Add(5 * time.Second)
		for due.Add(-keep).UnixMilli() <= sentMs {
			due = t0.Add((due.Sub(t0)/iv + 1) * iv)
		}
		bubble.Advance(time.Until(due) - time.Nanosecond)
		synctest.Wait()
		if n := b.metrics.Get("retention.pruned.direct"); n != 0 || len(mailboxFiles(t, m.home(1))) != 1 {
			t.Fatalf("%d DMs pruned before the pass due %v after it came", n, due.Sub(time.UnixMilli(sentMs)))
		}
		bubble.Advance(time.Nanosecond)
		synctest.Wait()
		if n := b.metrics.Get("retention.pruned.direct"); n != 1 {
			t.Fatalf("%d DMs pruned by the pass due %v after the DM came, want 1", n, due.Sub(time.UnixMilli(sentMs)))
		}
		if files := mailboxFiles(t, m.home(1)); len(files) != 0 {
			t.Fatalf("the pruned DM's mailbox file stayed: %v", files)
		}
	})
}
