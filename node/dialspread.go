package node

import (
	"time"

	"github.com/meshd/meshd/internal/clockgrid"
	"github.com/meshd/meshd/node/peers"
)

// dialsLocked counts the dials in flight (at most peers.MaxDials).
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

// spreadFirstDialLocked puts off the first dial of p, which is due now,
// and reports whether it did (see peers.FirstDialDelay). Only a member
// never dialled nor refused is put off, once.
func (n *Node) spreadFirstDialLocked(p *peer, now time.Time) bool {
	if p.spread || p.fails > 0 || p.refusals > 0 {
		return false
	}
	p.spread = true
	p.next = now.Add(peers.FirstDialDelay(n.id.Pub.NodeID(), p.key.NodeID(), len(n.Roster().Members)))
	return true
}

// alignedDelay returns how long from now until the next multiple of iv
// on the clock (iv when that is now).
func alignedDelay(now time.Time, iv time.Duration) time.Duration {
	if iv <= 0 {
		return time.Second
	}
	return clockgrid.Wait(now, time.Nanosecond, iv) // strictly after now
}
