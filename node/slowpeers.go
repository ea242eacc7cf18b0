package node

import (
	"errors"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famRecvThrottled = newFamily("meshd_link_receive_throttled_total", "Times a link stopped reading its peer to keep to the per-link receive rate.")
	famQueueFull     = newFamily("meshd_link_send_queue_full_total", "Frames refused by a full link send queue (frames or bytes).")

	cLinkRefusedSlow     = newCounter("link.refused_slow", famLinkEvents, "refused_slow")
	cLinkRecvThrottled   = newCounter("link.recv_throttled", famRecvThrottled)
	cLinkRecvThrottledMs = newEvent("link.recv_throttled_ms")
	cLinkRecvCredited    = newEvent("link.recv_credited_bytes")
	cLinkSendQueueFull   = newCounter("link.send_queue_full", famQueueFull)
	cLinkClosedSlow      = newCounter("link.closed_slow", famLinkEvents, "closed_slow")
)

// Peers that stop reading are held back (peers.SlowPeers): links from
// them are refused with a goodbye until their window ends, and they are
// not dialled before then.

// Admit refuses a new link from a peer held in the slow backoff: it
// says goodbye, closes it and counts link.refused_slow. It reports
// whether it let the link in; the service drops it otherwise.
func (h *peerHost) Admit(l *transport.Link) bool {
	n := (*Node)(h)
	until := n.peers.Slow.HeldUntil(l.PeerKey(), time.Now())
	if until.IsZero() {
		return true
	}
	n.metrics.inc(cLinkRefusedSlow)
	n.log.Debug("link refused: the peer did not read on its last link", "peer", l.PeerKey().Fingerprint(),
		"addr", l.RemoteAddr(), "until", until.UTC().Format(time.RFC3339))
	_ = l.Send(peers.GoodbyeFrame("not reading: try again later"))
	// The link is new, so the goodbye fits the socket's buffer and Close
	// (which flushes for at most a second) returns at once.
	_ = l.Close()
	return false
}

// linkClosed runs as a link goes down: a peer that stopped reading gets
// a strike and is not dialled before its window ends. It also folds the
// link's receive pacing into the node's counters.
func (h *peerHost) linkClosed(pl *peers.Link) {
	n := (*Node)(h)
	st := pl.Conn.Stats()
	if st.RecvThrottled > 0 {
		n.metrics.add(cLinkRecvThrottled, st.RecvThrottled)
		n.metrics.add(cLinkRecvThrottledMs, uint64(st.RecvThrottledTime.Milliseconds()))
	}
	if st.RecvCredited > 0 {
		n.metrics.add(cLinkRecvCredited, st.RecvCredited)
	}
	if st.QueueFull > 0 {
		n.metrics.add(cLinkSendQueueFull, st.QueueFull)
	}
	if !errors.Is(pl.Conn.Err(), transport.ErrSlowReader) {
		return
	}
	now := time.Now()
	until := n.peers.Slow.Strike(pl.Key, now)
	n.metrics.inc(cLinkClosedSlow)
	n.log.Warn("link closed: the peer stopped reading", "peer", pl.Key.Fingerprint(), "name", pl.Payload.Name,
		"backoff", until.Sub(now).Round(time.Second).String())
	n.peers.Lock()
	if p := n.peers.ByKey[pl.Key]; p != nil && p.Next.Before(until) {
		p.Next = until
	}
	n.peers.Unlock()
}

// addLinkStats adds the open links' pacing and queue refusals to c;
// linkClosed adds those of closed links to the node's counters.
func (n *Node) addLinkStats(c map[string]uint64) {
	for _, pl := range n.peers.Links() {
		st := pl.Conn.Stats()
		for name, v := range map[string]uint64{
			"link.recv_throttled":      st.RecvThrottled,
			"link.recv_throttled_ms":   uint64(st.RecvThrottledTime.Milliseconds()),
			"link.recv_credited_bytes": st.RecvCredited,
			"link.send_queue_full":     st.QueueFull,
			"link.pings_in":            st.PingsIn,
			"link.pings_out":           st.PingsOut,
			"link.keepalive_wakeups":   st.KeepaliveWakes,
		} {
			if v > 0 {
				c[name] += v
			}
		}
	}
}
