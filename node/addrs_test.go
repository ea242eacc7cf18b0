package node

import (
	"testing"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// addrNode is just enough of a node for the address rules: an identity
// and a roster holding member.
func addrNode(t *testing.T) (*Node, proto.PubKey) {
	t.Helper()
	m := newTestMesh(t, 2)
	n := &Node{metrics: newMetrics()}
	n.peers = newPeerService(n, peers.Legacy{})
	n.id = m.ids[0]
	n.roster = newRosterKeeper(n)
	n.roster.Init(m.roster)
	return n, m.ids[1].Pub
}

func TestAddrRules(t *testing.T) {
	t.Parallel()
	n, k := addrNode(t)
	n.peers.Lock()
	defer n.peers.Unlock()
	tcp := func(i int) string {
		return transport.Addr{Network: "tcp", Address: "192.0.2." + string(rune('0'+i)) + ":7946"}.String()
	}

	// Third parties: no Unix socket, at most peers.MaxGossipAddrs TCP addresses.
	in := []string{"unix:///run/other.sock"}
	for i := range 6 {
		in = append(in, tcp(i))
	}
	if ign, _ := n.peers.MergeAddrsLocked(k, in, peers.Gossip); ign != 3 {
		t.Fatalf("ignored %d, want 3 (the socket and two over the budget)", ign)
	}
	p := n.peers.ByKey[k]
	if p.Addrs.Len() != peers.MaxGossipAddrs {
		t.Fatalf("kept %v", p.Addrs.List())
	}

	// The member's own claims fill up, displacing third-party addresses.
	var own []string
	for i := range peers.MaxDialAddrs {
		own = append(own, transport.Addr{Network: "tcp", Address: "198.51.100." + string(rune('1'+i)) + ":7946"}.String())
	}
	n.peers.MergeAddrsLocked(k, own, peers.Self)
	if p.Addrs.Len() != peers.MaxDialAddrs || p.Addrs.CountFrom(peers.Gossip) != 0 {
		t.Fatalf("after own claims: %v, %d from gossip", p.Addrs, p.Addrs.CountFrom(peers.Gossip))
	}
	// A Unix socket only from the member over a local link.
	sock := "unix:///home/m/.meshd/link.sock"
	p.Addrs.Clear()
	if ign, _ := n.peers.MergeAddrsLocked(k, []string{sock}, peers.Self); ign != 1 || p.Addrs.Len() != 0 {
		t.Fatalf("unix over a remote link: ignored %d, kept %v", ign, p.Addrs.List())
	}
	if ign, _ := n.peers.MergeAddrsLocked(k, []string{sock}, peers.SelfLocal); ign != 0 || p.Addrs.Len() != 1 {
		t.Fatalf("unix over a local link: ignored %d, kept %v", ign, p.Addrs.List())
	}

	// Gossiped addresses are evicted after peers.MaxGossipFails failures and
	// spend the budget until the eviction expires.
	p.Addrs.Clear()
	n.peers.MergeAddrsLocked(k, []string{tcp(1)}, peers.Gossip)
	a := p.Addrs.List()[0]
	for range peers.MaxGossipFails {
		p.Addrs.DialResult([]transport.Addr{a}, transport.Addr{}, time.Now())
	}
	if p.Addrs.Len() != 0 {
		t.Fatalf("not evicted: %v", p.Addrs.List())
	}
	if ign, _ := n.peers.MergeAddrsLocked(k, []string{tcp(1)}, peers.Gossip); ign != 1 {
		t.Fatal("evicted address taken again from gossip")
	}
	if ign, _ := n.peers.MergeAddrsLocked(k, []string{tcp(1)}, peers.Self); ign != 0 {
		t.Fatal("the member's own claim refused")
	}
}
