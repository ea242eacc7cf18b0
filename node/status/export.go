package status

import (
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// The views the Prometheus exporter (package node/promexport) reads.

// Queue names reported by [Reporter.QueueDepths].
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

// QueueDepths returns how full the node's internal queues are.
func (s *Reporter) QueueDepths() []QueueDepth {
	links := s.host.Links()
	send := QueueDepth{Name: QueueLinkSend}
	for _, pl := range links {
		l, c := pl.Conn.QueueLen()
		send.Len += l
		send.Cap += c
	}
	commitLen, commitCap, mirrorLen, mirrorCap := s.host.Queues()
	return []QueueDepth{
		{Name: QueueRxCommit, Len: commitLen, Cap: commitCap},
		{Name: QueueMirror, Len: mirrorLen, Cap: mirrorCap},
		send,
	}
}

// LinkClass groups links for [Reporter.LinkCounts].
type LinkClass struct {
	Network   string // "tcp" or "unix"
	Direction string // "inbound" or "outbound", as in [Reporter.PeerList]
}

// LinkCounts returns the number of admitted links by network and
// direction. Classes with no link are absent.
func (s *Reporter) LinkCounts() map[LinkClass]int {
	links := s.host.Links()
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
// as [Reporter.PresenceTable] would list them. Members never heard from are
// not counted.
func (s *Reporter) PresenceCounts() map[string]int {
	r := s.host.Roster()
	out := map[string]int{}
	for _, e := range s.presence.All(time.Now()) {
		if _, ok := r.Member(e.Key); !ok {
			continue
		}
		out[e.State.String()]++
	}
	return out
}

// HistoryStats returns the history store's size and activity. It reads
// the store's count buckets in one short read transaction.
func (s *Reporter) HistoryStats() (history.Stats, error) { return s.store.Stats() }

// Started returns when the node was created.
func (s *Reporter) Started() time.Time { return s.cfg.Started }

// PresenceStates lists the presence states [Reporter.PresenceCounts] reports,
// in wire order, so exporters can report zeros for the empty ones.
func PresenceStates() []string {
	return []string{proto.Online.String(), proto.Away.String(), proto.Offline.String()}
}
