package node

import (
	"slices"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// startPX starts node i of m with a fast peer-exchange interval; legacy
// makes it exchange peers as nodes without peer-update frames do.
func startPX(m *testMesh, i int, legacy bool, seeds ...transport.Addr) *Node {
	m.t.Helper()
	m.writeRoster(i, m.roster)
	return m.startHooked(i, &testHooks{legacyPeers: legacy}, func(c *Config) {
		c.NoUnixListener = true
		c.PeerExchangeInterval = 200 * time.Millisecond
	}, seeds...)
}

// TestIncrementalPeerExchange: once the mesh has formed, nodes that
// speak peer-update frames send each other digests, not whole lists,
// every interval; a node whose list drifted from what it told is caught
// by the digest and sends its whole list again; and an older node (whole
// lists only, peer-update frames unknown to it) still links with both
// and keeps getting whole lists.
func TestIncrementalPeerExchange(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 4)
	a := startPX(m, 0, false)
	b := startPX(m, 1, false, tcpAddr(t, a))
	c := startPX(m, 2, false, tcpAddr(t, a))
	old := startPX(m, 3, true, tcpAddr(t, a))
	all := []*Node{a, b, c, old}
	waitFor(t, 15*time.Second, "full mesh", func() bool {
		for _, n := range all {
			if len(n.Backend().PeerList()) != 3 {
				return false
			}
		}
		return true
	})

	// Whole lists stop between a, b and c: over ten intervals of digests,
	// b receives peers frames from the older node only.
	fromOld := func(n *Node) uint64 { return n.metrics.Get("peers.updates") }
	peersBytes := func(n *Node) uint64 { return n.metrics.frameBytes[proto.FramePeers].Load() }
	waitFor(t, 10*time.Second, "digests flowing", func() bool { return fromOld(b) >= 20 })
	u0, p0 := fromOld(b), peersBytes(b)
	oldP0 := peersBytes(old)
	waitFor(t, 10*time.Second, "ten more digests", func() bool { return fromOld(b) >= u0+20 })
	grown := peersBytes(b) - p0
	// At most one whole list per interval comes from the older node; the
	// others send none. Allow the older node's lists only.
	const oldList = 4 * 100            // an upper bound on a three-entry list's bytes
	intervals := (fromOld(b) - u0) / 2 // b gets a digest from a and c each interval
	if grown > (intervals+2)*oldList {
		t.Errorf("b received %d bytes of whole lists over %d intervals: more than the older node's", grown, intervals)
	}
	if got := b.Backend().Counters()["rx.frame_bytes.peer-update"]; got == 0 {
		t.Error("peer-update bytes not counted as such")
	}
	if d := b.metrics.Get("peers.digest_mismatch"); d != 0 {
		t.Errorf("%d digest mismatches in a settled mesh", d)
	}
	// The older node keeps getting whole lists, and ignores updates it
	// does not know (it got at most one per link, at link up).
	waitFor(t, 10*time.Second, "whole lists to the older node", func() bool { return peersBytes(old) > oldP0+3*100 })
	if u := old.metrics.Get("frame.unknown"); u > 3 {
		t.Errorf("the older node got %d peer-update frames, want at most one per link", u)
	}

	// Drift: c's entry for a changes, and the update telling b is lost
	// (c marks b told). b's copy of c's list no longer matches c's
	// digest: b asks for the whole list and takes a's new address from it.
	c.peers.Lock()
	pla := c.peers.ByKey[a.id.Pub].Link
	pla.SetListen(append(slices.Clone(pla.ListenAddrs()), "tcp://192.0.2.99:7946"))
	c.peers.RefreshLocked(c.peers.Advertised())
	c.peers.ByKey[b.id.Pub].Link.PX.SentVer = c.peers.List.Version()
	c.peers.Unlock()
	waitFor(t, 10*time.Second, "c asked for its whole list", func() bool { return c.metrics.Get("peers.resync_asked") > 0 })
	waitFor(t, 10*time.Second, "b takes the drifted address", func() bool {
		b.peers.Lock()
		defer b.peers.Unlock()
		p := b.peers.ByKey[a.id.Pub]
		_, ok := p.Addrs.SourceOf(transport.Addr{Network: "tcp", Address: "192.0.2.99:7946"})
		return ok
	})
}
