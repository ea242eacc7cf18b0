package node

import (
	"context"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// A peer that announces one address this node cannot use still links
// (§12.2): the address is skipped and counted in addr.ignored, and so is
// one in a peer list.
func TestUnusableListenAddrSkipped(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	m.writeRoster(0, m.roster)
	a := m.start(0)
	cfg := transport.DefaultConfig()
	cfg.Identity = m.ids[1].Key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload {
		return proto.HandshakePayload{RosterVersion: m.roster.Version,
			Listen: []string{"quic://192.0.2.1:7946", "tcp://192.0.2.1:7946"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ak := m.ids[0].Pub
	l, err := transport.Dial(ctx, tcpAddr(t, a), cfg, &ak)
	if err != nil {
		t.Fatalf("dial with one unusable listen address: %v", err)
	}
	defer l.Close()
	l.Start(func([]byte) {})
	waitFor(t, 5*time.Second, "link admitted", func() bool { return linked(a, m.ids[1].Pub) })
	// The link is listed before LinkUp counts what its handshake skipped.
	waitFor(t, 5*time.Second, "addr.ignored from the handshake", func() bool { return a.metrics.Get("addr.ignored") >= 1 })
	if got := a.metrics.Get("addr.ignored"); got != 1 {
		t.Fatalf("addr.ignored = %d after the handshake, want 1", got)
	}
	a.peers.Lock()
	p := a.peers.ByKey[m.ids[1].Pub]
	var addrs []transport.Addr
	if p != nil {
		addrs = append(addrs, p.Addrs.List()...)
	}
	a.peers.Unlock()
	if len(addrs) != 1 || addrs[0].String() != "tcp://192.0.2.1:7946" {
		t.Fatalf("recorded addresses %v, want only tcp://192.0.2.1:7946", addrs)
	}

	// A peer list naming c with a good and a bad address.
	pl, err := proto.Marshal(&proto.PeerList{Peers: []proto.PeerInfo{
		{Key: m.ids[2].Pub, Addrs: []string{"tcp://:7946", "tcp://192.0.2.3:7946"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FramePeers)}, pl...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "addr.ignored from the peer list", func() bool { return a.metrics.Get("addr.ignored") == 2 })
	if got := a.metrics.Get("peers.malformed"); got != 0 {
		t.Fatalf("peers.malformed = %d: the list was refused", got)
	}
}
