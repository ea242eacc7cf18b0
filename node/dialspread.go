package node

import (
	"math/rand/v2"
	"time"
)

// Link formation without storms. When many nodes start at once, every
// node learns of every other within a second or two (peer exchange), and
// dialling them all at once would put hundreds of handshakes on each
// listener together: they would be shed (transport's MaxHandshakes and
// per-source limits), fail, back off and evict the addresses they were
// learnt from. And both ends of a pair would dial each other, so that
// half the handshakes end in "duplicate link". So:
//
//   - A node holds at most maxDials dials in flight.
//   - The first dial of a member learnt from anyone is put off by a
//     random delay whose spread grows with the roster (dialSpread). The
//     node whose link would win the duplicate rule (PROTOCOL.md §14.2
//     rule 1: the link dialled by the lower NodeID) draws it from
//     [0, spread); the other end from [spread, 2*spread), so that the
//     winning link is usually up before the other end dials at all, and
//     it then never does.
//
// Later dials follow the backoff (links.go): redials are not spread.

const (
	// maxDials bounds the dials one node has in flight.
	maxDials = 8
	// dialSpreadPerMember, dialSpreadMin and dialSpreadMax give the
	// spread of first dials: 10 ms per roster member, from 200 ms to 5 s
	// (2 s at 200 members).
	dialSpreadPerMember = 10 * time.Millisecond
	dialSpreadMin       = 200 * time.Millisecond
	dialSpreadMax       = 5 * time.Second
)

// dialsLocked counts the dials in flight.
func (n *Node) dialsLocked() int {
	c := 0
	for _, p := range n.peers.byKey {
		if p.dialing {
			c++
		}
	}
	for _, s := range n.peers.seeds {
		if s.dialing {
			c++
		}
	}
	return c
}

// dialSpread is the spread of first dials for a roster of members.
func dialSpread(members int) time.Duration {
	return min(max(time.Duration(members)*dialSpreadPerMember, dialSpreadMin), dialSpreadMax)
}

// spreadFirstDialLocked puts off the first dial of p, which is due now,
// and reports whether it did. Only a member never dialled nor refused is
// put off, once.
func (n *Node) spreadFirstDialLocked(p *peer, now time.Time) bool {
	if p.spread || p.fails > 0 || p.refusals > 0 {
		return false
	}
	p.spread = true
	spread := dialSpread(len(n.Roster().Members))
	d := time.Duration(rand.Int64N(int64(spread)))
	if !n.id.Pub.NodeID().Less(p.key.NodeID()) {
		d += spread // the peer's dial wins: give it the first go
	}
	p.next = now.Add(d)
	return true
}
