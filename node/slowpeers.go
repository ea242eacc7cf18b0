package node

import (
	"errors"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famRecvThrottled = newFamily("meshd_link_receive_throttled_total", "Times a link stopped reading its peer to keep to the per-link receive rate.")
	famQueueFull     = newFamily("meshd_link_send_queue_full_total", "Frames refused by a full link send queue (frames or bytes).")

	cLinkRefusedSlow     = newCounter("link.refused_slow", famLinkEvents, "refused_slow")
	cLinkRecvThrottled   = newCounter("link.recv_throttled", famRecvThrottled)
	cLinkRecvThrottledMs = newEvent("link.recv_throttled_ms")
	cLinkSendQueueFull   = newCounter("link.send_queue_full", famQueueFull)
	cLinkClosedSlow      = newCounter("link.closed_slow", famLinkEvents, "closed_slow")
)

// Peers that stop reading.
//
// A link's send queue is bounded in bytes and frames (transport
// Config.SendQueueBytes and SendQueue), and a write blocked for the idle
// timeout closes the link with transport.ErrSlowReader. Such a peer
// would reconnect at once and fill a fresh queue, so its key is held in
// a backoff: links from it (inbound or dialled) are refused with a
// goodbye until the window ends, and we do not dial it before then.
// Each further slow close doubles the window, from slowBackoffMin up to
// slowBackoffMax; a key with no slow close for slowForget is forgotten.

const (
	// slowBackoffMin is the first window: long enough that a peer that
	// does not read spends most of its time refused, short enough that a
	// peer that was merely stalled (a paused VM) is back soon.
	slowBackoffMin = 15 * time.Second
	// slowBackoffMax caps the window.
	slowBackoffMax = 5 * time.Minute
	// slowForget is how long a key's strikes are kept after its last
	// slow close.
	slowForget = 30 * time.Minute
	// maxSlowPeers bounds the table; members only get in, so it is
	// reached only by a roster of that many slow members.
	maxSlowPeers = 4096
)

// slowPeers holds the keys closed for not reading.
type slowPeers struct {
	mu sync.Mutex
	m  map[proto.PubKey]*slowPeer // guarded by mu
}

type slowPeer struct {
	strikes int
	until   time.Time // links are refused before this
	last    time.Time // the last slow close
}

// window returns the backoff after the given number of slow closes.
func slowWindow(strikes int) time.Duration {
	d := slowBackoffMin
	for i := 1; i < strikes && d < slowBackoffMax; i++ {
		d *= 2
	}
	return min(d, slowBackoffMax)
}

// strike records a slow close of k at now and returns the window.
func (s *slowPeers) strike(k proto.PubKey, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[proto.PubKey]*slowPeer{}
	}
	for key, p := range s.m {
		if now.Sub(p.last) > slowForget {
			delete(s.m, key)
		}
	}
	p := s.m[k]
	if p == nil {
		if len(s.m) >= maxSlowPeers {
			return now // no room: the link is closed, but not held back
		}
		p = &slowPeer{}
		s.m[k] = p
	}
	p.strikes++
	p.last = now
	p.until = now.Add(slowWindow(p.strikes))
	return p.until
}

// heldUntil returns when k's backoff ends; zero if it is not held.
func (s *slowPeers) heldUntil(k proto.PubKey, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[k]; p != nil && now.Before(p.until) {
		return p.until
	}
	return time.Time{}
}

// refuseSlow refuses a new link from a peer held in the slow backoff: it
// says goodbye, closes it and counts link.refused_slow. It reports
// whether it refused; addLink then drops the link.
func (n *Node) refuseSlow(l *transport.Link) bool {
	until := n.slow.heldUntil(l.PeerKey(), time.Now())
	if until.IsZero() {
		return false
	}
	n.metrics.inc(cLinkRefusedSlow)
	n.log.Debug("link refused: the peer did not read on its last link", "peer", l.PeerKey().Fingerprint(),
		"addr", l.RemoteAddr(), "until", until.UTC().Format(time.RFC3339))
	_ = l.Send(goodbyeFrame("not reading: try again later"))
	// The link is new, so the goodbye fits the socket's buffer and Close
	// (which flushes for at most a second) returns at once.
	_ = l.Close()
	return true
}

// linkClosed runs as a link goes down: a peer that stopped reading gets
// a strike and is not dialled before its window ends. It also folds the
// link's receive pacing into the node's counters.
func (n *Node) linkClosed(pl *peerLink) {
	st := pl.link.Stats()
	if st.RecvThrottled > 0 {
		n.metrics.add(cLinkRecvThrottled, st.RecvThrottled)
		n.metrics.add(cLinkRecvThrottledMs, uint64(st.RecvThrottledTime.Milliseconds()))
	}
	if st.QueueFull > 0 {
		n.metrics.add(cLinkSendQueueFull, st.QueueFull)
	}
	if !errors.Is(pl.link.Err(), transport.ErrSlowReader) {
		return
	}
	now := time.Now()
	until := n.slow.strike(pl.key, now)
	n.metrics.inc(cLinkClosedSlow)
	n.log.Warn("link closed: the peer stopped reading", "peer", pl.key.Fingerprint(), "name", pl.payload.Name,
		"backoff", until.Sub(now).Round(time.Second).String())
	n.peers.Lock()
	if p := n.peers.byKey[pl.key]; p != nil && p.next.Before(until) {
		p.next = until
	}
	n.peers.Unlock()
}

// addLinkStats adds the open links' pacing and queue refusals to c;
// linkClosed adds those of closed links to the node's counters.
func (n *Node) addLinkStats(c map[string]uint64) {
	for _, pl := range n.linkList() {
		st := pl.link.Stats()
		for name, v := range map[string]uint64{
			"link.recv_throttled":    st.RecvThrottled,
			"link.recv_throttled_ms": uint64(st.RecvThrottledTime.Milliseconds()),
			"link.send_queue_full":   st.QueueFull,
			"link.pings_in":          st.PingsIn,
			"link.pings_out":         st.PingsOut,
		} {
			if v > 0 {
				c[name] += v
			}
		}
	}
}
