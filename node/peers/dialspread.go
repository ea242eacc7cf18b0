package peers

import (
	"math/rand/v2"
	"time"

	"github.com/meshd/meshd/proto"
)

// Link formation without storms. When many nodes start at once, every
// node learns of every other within a second or two (peer exchange), and
// dialling them all at once would put hundreds of handshakes on each
// listener together: they would be shed (transport's MaxHandshakes and
// per-source limits), fail, back off and evict the addresses they were
// learnt from. And both ends of a pair would dial each other, so that
// half the handshakes end in "duplicate link". So:
//
//   - A node holds at most MaxDials dials in flight.
//   - The first dial of a member learnt from anyone is put off by a
//     random delay whose spread grows with the roster (DialSpread). The
//     node whose link would win the duplicate rule (PROTOCOL.md §14.2
//     rule 1: the link dialled by the lower NodeID) draws it from
//     [0, spread); the other end from [spread+lead, 2*spread+lead), so
//     that the winning link is usually up before the other end dials at
//     all, and it then never does. lead covers the two ends learning of
//     each other at different times (a peer-update batch apart).
//
// Later dials follow the backoff (Backoff, RefusedBackoff): redials are
// not spread.

const (
	// MaxDials bounds the dials one node has in flight. With many nodes
	// on one host, every dial comes from one source address, of which a
	// listener admits 8 handshakes at a time (transport
	// MaxHandshakesPerSource) and sheds the rest, which fail, back off
	// and count towards evicting the address (addrs.go). 2 per node keeps
	// the mean load per listener at 2 when every node dials at once, and
	// more than 8 rare (measured: 4 in flight shed 41% of the dials of
	// 120 nodes starting together on one host).
	MaxDials = 2
	// ExchangeBatch is how long peer-list changes gather before a node
	// sends them, at least (the node's incremental peer exchange).
	ExchangeBatch = time.Second
	// dialLead is the head start of the end whose link wins.
	dialLead = 2 * ExchangeBatch
	// dialSpreadPerMember, dialSpreadMin and dialSpreadMax give the
	// spread of first dials: 10 ms per roster member, from 200 ms to 5 s
	// (2 s at 200 members).
	dialSpreadPerMember = 10 * time.Millisecond
	dialSpreadMin       = 200 * time.Millisecond
	dialSpreadMax       = 5 * time.Second
)

// DialSpread is the spread of first dials for a roster of members.
func DialSpread(members int) time.Duration {
	return min(max(time.Duration(members)*dialSpreadPerMember, dialSpreadMin), dialSpreadMax)
}

// FirstDialDelay draws how long self puts off its first dial of peer in
// a roster of members: within the spread when self's link would win the
// duplicate rule, after the spread and the lead otherwise.
func FirstDialDelay(self, peer proto.NodeID, members int) time.Duration {
	spread := DialSpread(members)
	d := time.Duration(rand.Int64N(int64(spread)))
	if !self.Less(peer) {
		d += spread + dialLead // the peer's dial wins: give it the first go
	}
	return d
}
