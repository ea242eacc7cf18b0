package peers

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

func tcpAddr(i int) string { return fmt.Sprintf("tcp://192.0.2.%d:7946", i) }

// TestAddrBookGossipBudget: third parties fill at most MaxGossipAddrs
// places, an evicted address is not retaken from them within EvictedFor
// and still counts against their budget, and the member's own claim
// takes it back at once.
func TestAddrBookGossipBudget(t *testing.T) {
	var b AddrBook
	now := time.Now()
	var in []string
	for i := range MaxGossipAddrs + 2 {
		in = append(in, tcpAddr(i))
	}
	if ign, add := b.Merge(in, Gossip, now); ign != 2 || add != MaxGossipAddrs {
		t.Fatalf("merge: ignored %d added %d", ign, add)
	}
	a := b.List()[0]
	for range MaxGossipFails {
		b.DialResult([]transport.Addr{a}, transport.Addr{}, now)
	}
	if b.Len() != MaxGossipAddrs-1 {
		t.Fatalf("not evicted: %v", b.List())
	}
	later := now.Add(2 * GossipRecheck)
	if ign, _ := b.Merge([]string{a.String(), tcpAddr(50)}, Gossip, later); ign != 2 {
		t.Fatalf("evicted address retaken, or budget not kept: ignored %d", ign)
	}
	if _, add := b.Merge([]string{a.String()}, Self, later); add != 1 {
		t.Fatal("the member's own claim was not taken")
	}
	if src, ok := b.SourceOf(a); !ok || src != Self {
		t.Fatalf("source %v %v", src, ok)
	}
}

// TestAddrBookSeed: a seed's address is never evicted by failed dials.
func TestAddrBookSeed(t *testing.T) {
	a, err := transport.ParseAddr(tcpAddr(1))
	if err != nil {
		t.Fatal(err)
	}
	b := SeedBook(a)
	for range MaxSelfFails + 1 {
		if ev := b.DialResult([]transport.Addr{a}, transport.Addr{}, time.Now()); ev != 0 {
			t.Fatalf("evicted %d", ev)
		}
	}
	if b.Len() != 1 {
		t.Fatalf("seed book %v", b.List())
	}
}

// TestFirstDialDelay: the end whose link wins the duplicate rule dials
// within the spread, the other after the spread and the lead.
func TestFirstDialDelay(t *testing.T) {
	lo, hi := proto.NodeID{1}, proto.NodeID{2}
	spread := DialSpread(100)
	for range 100 {
		if d := FirstDialDelay(lo, hi, 100); d < 0 || d >= spread {
			t.Fatalf("winner's delay %v outside [0, %v)", d, spread)
		}
		if d := FirstDialDelay(hi, lo, 100); d < spread+dialLead || d >= 2*spread+dialLead {
			t.Fatalf("loser's delay %v outside [%v, %v)", d, spread+dialLead, 2*spread+dialLead)
		}
	}
}
