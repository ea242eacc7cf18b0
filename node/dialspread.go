package node

import (
	"time"

	"github.com/meshd/meshd/internal/clockgrid"
	"github.com/meshd/meshd/node/peers"
)

// spreadFirstDialLocked puts off the first dial of p, which is due now,
// and reports whether it did (see peers.FirstDialDelay). Only a member
// never dialled nor refused is put off, once.
func (n *Node) spreadFirstDialLocked(p *peers.Peer, now time.Time) bool {
	if p.Spread || p.Fails > 0 || p.Refusals > 0 {
		return false
	}
	p.Spread = true
	p.Next = now.Add(peers.FirstDialDelay(n.id.Pub.NodeID(), p.Key.NodeID(), len(n.Roster().Members)))
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
