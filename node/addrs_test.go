package node

import (
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// addrNode is just enough of a node for the address rules: an identity
// and a roster holding member.
func addrNode(t *testing.T) (*Node, proto.PubKey) {
	t.Helper()
	m := newTestMesh(t, 2)
	n := &Node{metrics: newMetrics()}
	n.peers.byKey = map[proto.PubKey]*peer{}
	n.id = m.ids[0]
	n.roster.Store(m.roster)
	return n, m.ids[1].Pub
}

func TestAddrRules(t *testing.T) {
	n, k := addrNode(t)
	n.peers.Lock()
	defer n.peers.Unlock()
	tcp := func(i int) string {
		return transport.Addr{Network: "tcp", Address: "192.0.2." + string(rune('0'+i)) + ":7946"}.String()
	}

	// Third parties: no Unix socket, at most maxGossipAddrs TCP addresses.
	in := []string{"unix:///run/other.sock"}
	for i := range 6 {
		in = append(in, tcp(i))
	}
	if ign, _ := n.mergeAddrsLocked(k, in, addrGossip); ign != 3 {
		t.Fatalf("ignored %d, want 3 (the socket and two over the budget)", ign)
	}
	p := n.peers.byKey[k]
	if len(p.addrs) != maxGossipAddrs {
		t.Fatalf("kept %v", p.addrs)
	}

	// The member's own claims fill up, displacing third-party addresses.
	var own []string
	for i := range maxDialAddrs {
		own = append(own, transport.Addr{Network: "tcp", Address: "198.51.100." + string(rune('1'+i)) + ":7946"}.String())
	}
	n.mergeAddrsLocked(k, own, addrSelf)
	if len(p.addrs) != maxDialAddrs || p.countSrc(addrGossip) != 0 {
		t.Fatalf("after own claims: %v, %d from gossip", p.addrs, p.countSrc(addrGossip))
	}
	// A Unix socket only from the member over a local link.
	sock := "unix:///home/m/.meshd/link.sock"
	p.clearAddrs()
	if ign, _ := n.mergeAddrsLocked(k, []string{sock}, addrSelf); ign != 1 || len(p.addrs) != 0 {
		t.Fatalf("unix over a remote link: ignored %d, kept %v", ign, p.addrs)
	}
	if ign, _ := n.mergeAddrsLocked(k, []string{sock}, addrSelfLocal); ign != 0 || len(p.addrs) != 1 {
		t.Fatalf("unix over a local link: ignored %d, kept %v", ign, p.addrs)
	}

	// Gossiped addresses are evicted after maxGossipFails failures and
	// spend the budget until the eviction expires.
	p.clearAddrs()
	n.mergeAddrsLocked(k, []string{tcp(1)}, addrGossip)
	a := p.addrs[0]
	for range maxGossipFails {
		n.dialResultLocked(p, []transport.Addr{a}, transport.Addr{})
	}
	if len(p.addrs) != 0 {
		t.Fatalf("not evicted: %v", p.addrs)
	}
	if ign, _ := n.mergeAddrsLocked(k, []string{tcp(1)}, addrGossip); ign != 1 {
		t.Fatal("evicted address taken again from gossip")
	}
	if ign, _ := n.mergeAddrsLocked(k, []string{tcp(1)}, addrSelf); ign != 0 {
		t.Fatal("the member's own claim refused")
	}
}
