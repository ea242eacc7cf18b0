package node

import (
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// linkNetwork returns the network of n's link to k, or "".
func linkNetwork(n *Node, k proto.PubKey) string {
	for _, p := range n.Backend().PeerList() {
		if p.Key.Equal(k) {
			return p.Network
		}
	}
	return ""
}

// TestLinkMovesToUnix: two nodes on one host, each with a Unix listener,
// seeded by TCP: the link moves to a Unix socket, counted on both ends.
func TestLinkMovesToUnix(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	// The mover counts the move once its dial returns, which may be after
	// both ends registered the Unix link: wait for the count too.
	waitFor(t, 10*time.Second, "the link on a Unix socket at both ends", func() bool {
		return linkNetwork(a, m.ids[1].Pub) == "unix" && linkNetwork(b, m.ids[0].Pub) == "unix" &&
			a.metrics.Get("link.moved")+b.metrics.Get("link.moved") > 0
	})
	if a.metrics.Get("link.moved")+b.metrics.Get("link.moved") != 1 {
		t.Fatalf("link.moved a=%d b=%d, want one move", a.metrics.Get("link.moved"), b.metrics.Get("link.moved"))
	}
	if a.metrics.Get("link.move.agreed")+b.metrics.Get("link.move.agreed") != 1 {
		t.Fatalf("link.move.agreed a=%d b=%d, want one", a.metrics.Get("link.move.agreed"), b.metrics.Get("link.move.agreed"))
	}
	// Neither end was without a link for a moment: no frame was refused.
	for _, n := range []*Node{a, b} {
		for name, v := range n.metrics.Snapshot() {
			if v != 0 && (strings.HasPrefix(name, "send.dropped.") || strings.HasPrefix(name, "tx.dropped.") || name == "link.move.late") {
				t.Fatalf("%s = %d", name, v)
			}
		}
	}
}

// TestLinkMoveOlderPeer: a node of before link-move frames never agrees,
// so the link stays on TCP and no duplicate link is made.
func TestLinkMoveOlderPeer(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	a := m.startHooked(0, &testHooks{legacyLinks: true}, nil)
	b := m.start(1, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "b's ask reaching the older node", func() bool {
		return b.metrics.Get("link.move.asked") >= 1 && a.metrics.Get("frame.unknown") >= 1
	})
	// The ask waits moveWait for an answer that never comes; whatever
	// comes before, the link is the one TCP link.
	if nw := linkNetwork(b, m.ids[0].Pub); nw != "tcp" {
		t.Fatalf("b's link is on %q, want tcp", nw)
	}
	for _, n := range []*Node{a, b} {
		if d, up := n.metrics.Get("link.duplicate"), n.metrics.Get("link.up"); d != 0 || up != 1 {
			t.Fatalf("link.duplicate %d, link.up %d; want 0 and 1", d, up)
		}
	}
	if c := b.metrics.Get("link.move.asked"); c != 1 {
		t.Fatalf("b asked %d times, want once per retry period", c)
	}
}

// TestLinkMoveFramesChecked: a malformed link-move frame and an agreement
// nobody asked for are counted and change nothing.
func TestLinkMoveFramesChecked(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	tcpOnly := func(c *Config) { c.NoUnixListener = true } // no move of their own
	a := m.startWith(0, tcpOnly)
	b := m.startWith(1, tcpOnly, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) && linked(b, m.ids[0].Pub) })
	a.peers.Lock()
	pl := a.peers.LinkedLocked(m.ids[1].Pub)
	a.peers.Unlock()
	a.handleFrame(pl, []byte{byte(proto.FrameLinkMove), 0xa1, 0x00, 0x07}) // step 7
	a.handleFrame(pl, []byte{byte(proto.FrameLinkMove), 0xa1, 0x01, 0x01}) // unknown key
	if c := a.metrics.Get("link.move.malformed"); c != 2 {
		t.Fatalf("link.move.malformed %d, want 2", c)
	}
	before := a.metrics.Get("dial.attempt")
	a.handleFrame(pl, []byte{byte(proto.FrameLinkMove), 0xa1, 0x00, 0x02}) // agree, never asked
	if c := a.metrics.Get("link.move.ignored"); c != 1 {
		t.Fatalf("link.move.ignored %d, want 1", c)
	}
	if d := a.metrics.Get("dial.attempt"); d != before {
		t.Fatalf("an unasked agreement made %d dials", d-before)
	}
}

// TestLinkMoveSocketOfAnotherKey: a socket path that answers with another
// member's key (another node, a container sharing the path) is not taken:
// the dial fails and the link stays on TCP.
func TestLinkMoveSocketOfAnotherKey(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	for i := range 3 {
		m.writeRoster(i, m.roster)
	}
	tcpOnly := func(c *Config) { c.NoUnixListener = true } // no move of their own
	a := m.startWith(0, tcpOnly)
	b := m.startWith(1, tcpOnly, tcpAddr(t, a))
	c := m.start(2) // a node whose socket b finds under a's name
	waitFor(t, 10*time.Second, "b linked to a", func() bool { return linked(b, m.ids[0].Pub) })

	// b asked a to move, and a's path on this host holds c's socket.
	wrong := transport.Addr{Network: "unix", Address: c.home.LinkSocket()}
	b.peers.Lock()
	p := b.peers.ByKey[m.ids[0].Pub]
	pl := p.Link
	p.Addrs.Merge([]string{wrong.String()}, peers.SelfLocal, time.Now())
	p.Move.AskedOn, p.Move.AskedAt = pl, time.Now()
	b.peers.Unlock()
	b.handleFrame(pl, []byte{byte(proto.FrameLinkMove), 0xa1, 0x00, 0x02}) // agree
	waitFor(t, 10*time.Second, "b's move to fail", func() bool { return b.metrics.Get("link.move.failed") == 1 })
	if nw := linkNetwork(b, m.ids[0].Pub); nw != "tcp" {
		t.Fatalf("b's link to a is on %q, want tcp", nw)
	}
	if linked(c, m.ids[1].Pub) {
		t.Fatal("c kept a link b dialled expecting a")
	}
	if d := b.metrics.Get("link.duplicate"); d != 0 {
		t.Fatalf("link.duplicate %d, want 0", d)
	}
}

// TestGoodbyeWhileMoveAgreed: a goodbye on the peer's TCP link while a
// move is agreed leaves the link in place for the Unix link to retire;
// with no Unix link in peers.MoveGrace, it closes as after any goodbye.
func TestGoodbyeWhileMoveAgreed(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	tcpOnly := func(c *Config) { c.NoUnixListener = true }
	a := m.startWith(0, tcpOnly)
	b := m.startWith(1, tcpOnly, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) && linked(b, m.ids[0].Pub) })
	b.peers.Lock()
	p := b.peers.ByKey[m.ids[0].Pub]
	pl := p.Link
	p.Move.Agreed = time.Now().Add(time.Minute)
	b.peers.Unlock()
	b.handleFrame(pl, append([]byte{byte(proto.FrameGoodbye)}, "duplicate link"...))
	if pl.SaidGoodbye() || pl.Conn.Err() != nil {
		t.Fatal("the link was closed at the goodbye while a move was agreed")
	}
	b.peers.Lock()
	still := p.Link == pl
	b.peers.Unlock()
	if !still {
		t.Fatal("the link is no longer b's link to a")
	}
	waitFor(t, 2*peers.MoveGrace, "the link closed after peers.MoveGrace", func() bool {
		return b.metrics.Get("link.move.late") == 1 && pl.Conn.Err() != nil
	})
}
