package node

import (
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// This file holds read-only views of the node's state for exporters such
// as package promexport. Each takes the locks its state needs and returns
// copies, so a scrape never holds a node lock while it formats output.

// Queue names reported by [Node.QueueDepths].
const (
	QueueRxCommit = "rx_commit" // admitted envelopes waiting for the commit stage
	QueueMirror   = "mirror"    // inbox items waiting for the mailbox mirror writer
	QueueLinkSend = "link_send" // frames waiting in every link's send queue, summed
)

// QueueDepth is the fill of one of the node's internal queues.
type QueueDepth struct {
	Name string // [QueueRxCommit], [QueueMirror] or [QueueLinkSend]
	Len  int    // items waiting now
	Cap  int    // items the queue holds before its producers wait
}

// QueueDepths returns how full the node's internal queues are. The
// channels are created before the node runs and never replaced, so
// reading their length needs no lock.
func (n *Node) QueueDepths() []QueueDepth {
	links := n.linkList()
	send := QueueDepth{Name: QueueLinkSend}
	for _, pl := range links {
		l, c := pl.Conn.QueueLen()
		send.Len += l
		send.Cap += c
	}
	var mirrorLen, mirrorCap int
	if n.mbox != nil {
		mirrorLen, mirrorCap = n.mbox.Queued()
	}
	return []QueueDepth{
		{Name: QueueRxCommit, Len: len(n.rxq), Cap: cap(n.rxq)},
		{Name: QueueMirror, Len: mirrorLen, Cap: mirrorCap},
		send,
	}
}

// LinkClass groups links for [Node.LinkCounts].
type LinkClass struct {
	Network   string // "tcp" or "unix"
	Direction string // "inbound" or "outbound", as in [Node.PeerList]
}

// LinkCounts returns the number of admitted links by network and
// direction. Classes with no link are absent.
func (n *Node) LinkCounts() map[LinkClass]int {
	links := n.linkList()
	out := make(map[LinkClass]int, 4)
	for _, pl := range links {
		dir := "inbound"
		if pl.Conn.Outbound() {
			dir = "outbound"
		}
		out[LinkClass{Network: pl.Conn.Network(), Direction: dir}]++
	}
	return out
}

// PresenceCounts returns how many roster members, this node included,
// the presence table shows in each state ("online", "away", "offline"),
// as [Node.PresenceTable] would list them. Members never heard from are
// not counted.
func (n *Node) PresenceCounts() map[string]int {
	r := n.Roster()
	out := map[string]int{}
	for _, e := range n.presence.All(time.Now()) {
		if _, ok := r.Member(e.Key); !ok {
			continue
		}
		out[e.State.String()]++
	}
	return out
}

// HistoryStats returns the history store's size and activity. It reads
// the store's count buckets in one short read transaction.
func (n *Node) HistoryStats() (history.Stats, error) { return n.store.Stats() }

// Started returns when the node was created.
func (n *Node) Started() time.Time { return n.started }

// PresenceStates lists the presence states [Node.PresenceCounts] reports,
// in wire order, so exporters can report zeros for the empty ones.
func PresenceStates() []string {
	return []string{proto.Online.String(), proto.Away.String(), proto.Offline.String()}
}
