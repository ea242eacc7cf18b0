package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// testMesh is a set of homes sharing one roster, with node 0 the admin.
type testMesh struct {
	t      testing.TB
	dir    string
	ids    []home.Identity
	roster *roster.Roster
}

func newTestMesh(t testing.TB, n int, roles ...roster.Role) *testMesh {
	t.Helper()
	return newTestMeshWith(t, n, func(i int, mem *roster.Member) {
		if i > 0 && i-1 < len(roles) {
			mem.Role = roles[i-1]
		}
	})
}

// newTestMeshWith builds the homes and a roster with node 0 as admin and
// the rest members; member may adjust each entry (node i) before signing.
func newTestMeshWith(t testing.TB, n int, member func(i int, mem *roster.Member)) *testMesh {
	t.Helper()
	m := &testMesh{t: t, dir: t.TempDir()}
	for i := 0; i < n; i++ {
		h := home.Home{Dir: filepath.Join(m.dir, string(rune('a'+i)))}
		id, _, err := h.Init(string(rune('a' + i)))
		if err != nil {
			t.Fatal(err)
		}
		m.ids = append(m.ids, id)
	}
	r, err := roster.New("acme", m.ids[0].Key, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := r.Next()
	for i := 1; i < n; i++ {
		mem := roster.Member{Key: m.ids[i].Pub, Role: roster.RoleMember, Name: string(rune('a' + i))}
		member(i, &mem)
		if err := next.Add(mem); err != nil {
			t.Fatal(err)
		}
	}
	for i := range next.Members {
		if next.Members[i].Key.Equal(m.ids[0].Pub) {
			member(0, &next.Members[i])
		}
	}
	if err := next.Sign(m.ids[0].Key); err != nil {
		t.Fatal(err)
	}
	m.roster = next
	return m
}

func (m *testMesh) home(i int) string { return filepath.Join(m.dir, string(rune('a'+i))) }

// writeRoster installs r as the pinned roster of node i's home.
func (m *testMesh) writeRoster(i int, r *roster.Roster) {
	m.t.Helper()
	if err := (home.Home{Dir: m.home(i)}).SaveRoster(r); err != nil {
		m.t.Fatal(err)
	}
}

// testLogger returns the logger for a node in test t. With MESHD_TEST_LOG
// set it writes debug logs to stderr; otherwise it keeps the tail of the
// test's logs (all its nodes share one buffer) and prints it if the test
// fails, so a failure on a loaded CI machine can be read after the fact.
func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("MESHD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if _, bench := t.(*testing.B); bench {
		return nil // benchmarks measure the node, not log formatting
	}
	testLogsMu.Lock()
	defer testLogsMu.Unlock()
	tl := testLogs[t]
	if tl == nil {
		tl = &tailBuffer{max: 256 << 10}
		testLogs[t] = tl
		t.Cleanup(func() {
			testLogsMu.Lock()
			delete(testLogs, t)
			testLogsMu.Unlock()
			if t.Failed() {
				t.Logf("node logs (tail):\n%s", tl.String())
			}
		})
	}
	return slog.New(slog.NewTextHandler(tl, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

var (
	testLogsMu sync.Mutex
	testLogs   = map[testing.TB]*tailBuffer{}
)

// tailBuffer keeps about the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (tb *tailBuffer) Write(p []byte) (int, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.b = append(tb.b, p...)
	if len(tb.b) > 2*tb.max {
		tb.b = append(tb.b[:0], tb.b[len(tb.b)-tb.max:]...)
	}
	return len(p), nil
}

func (tb *tailBuffer) String() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	b := tb.b
	if len(b) > tb.max {
		b = b[len(b)-tb.max:]
	}
	return string(b)
}

func (m *testMesh) start(i int, seeds ...transport.Addr) *Node {
	m.t.Helper()
	cfg := DefaultConfig()
	cfg.Home = m.home(i)
	cfg.MDNS = false
	cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
	cfg.Seeds = seeds
	cfg.DialBackoffMin = 50 * time.Millisecond
	cfg.DialBackoffMax = 500 * time.Millisecond
	cfg.Logger = testLogger(m.t)
	n, err := newTestNode(m.t, cfg, nil)
	if err != nil {
		m.t.Fatalf("start node %d: %v", i, err)
	}
	return n
}

func tcpAddr(t testing.TB, n *Node) transport.Addr {
	t.Helper()
	for _, a := range n.ListenAddrs() {
		ad, err := transport.ParseAddr(a)
		if err == nil && ad.Network == "tcp" {
			return ad
		}
	}
	t.Fatal("node has no tcp listener")
	return transport.Addr{}
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// linkedPair starts two nodes of one roster, b seeded with a, and waits
// until they are linked.
func linkedPair(t testing.TB) (m *testMesh, a, b *Node) {
	t.Helper()
	m = newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	a = m.start(0)
	b = m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })
	if listensOnUnix(a) && listensOnUnix(b) {
		// The seed is a TCP address and both listen on a Unix socket
		// too, so the link moves there (PROTOCOL.md §14.12). Wait until
		// it has, the TCP link down at both ends, so that a test's
		// traffic does not straddle the move: a DM refused by the closing
		// link is re-sent after newer ones (delivery order is not
		// guaranteed, §16.5), and TestEventStreamBurstInOrder saw one.
		waitFor(t, 10*time.Second, "the link moved to the Unix socket at both ends", func() bool {
			return linkNetwork(a, m.ids[1].Pub) == "unix" && linkNetwork(b, m.ids[0].Pub) == "unix" &&
				a.metrics.Get("link.down") >= 1 && b.metrics.Get("link.down") >= 1
		})
	}
	return m, a, b
}

// listensOnUnix reports whether n listens on a Unix socket.
func listensOnUnix(n *Node) bool {
	for _, a := range n.ListenAddrs() {
		if ad, err := transport.ParseAddr(a); err == nil && ad.Network == "unix" {
			return true
		}
	}
	return false
}

func linked(n *Node, k proto.PubKey) bool {
	for _, p := range n.Backend().PeerList() {
		if p.Key.Equal(k) {
			return true
		}
	}
	return false
}

func TestMeshFormsThroughOneSeed(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	for i := range 3 {
		m.writeRoster(i, m.roster)
	}
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	c := m.start(2, tcpAddr(t, a))
	// b and c only know a; peer exchange must link them to each other.
	waitFor(t, 10*time.Second, "full mesh", func() bool {
		return len(a.Backend().PeerList()) == 2 && len(b.Backend().PeerList()) == 2 && len(c.Backend().PeerList()) == 2
	})
	// Exactly one link per pair, on both ends.
	for _, n := range []*Node{a, b, c} {
		seen := map[proto.PubKey]bool{}
		for _, p := range n.Backend().PeerList() {
			if seen[p.Key] {
				t.Fatalf("duplicate link to %s", p.Fingerprint)
			}
			seen[p.Key] = true
		}
	}
}

func TestSimultaneousDialKeepsOneLink(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	// TCP only: a move of the surviving link to a Unix socket would make
	// the ends disagree for a moment after they agreed (linkmove_test.go).
	tcpOnly := func(c *Config) { c.NoUnixListener = true }
	a := m.startWith(0, tcpOnly)
	b := m.startWith(1, tcpOnly, tcpAddr(t, a))
	// Now make a dial b too while b dials a.
	a.peers.Lock()
	a.peers.Seeds = append(a.peers.Seeds, &peers.Peer{Seed: true, Addrs: peers.SeedBook(tcpAddr(t, b))})
	a.peers.Unlock()
	a.peers.Wake()
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) && linked(b, m.ids[0].Pub) })
	// a's dial of b ends in a second link up at a, or in a duplicate a
	// closes, or fails; then the ends settle on one link.
	waitFor(t, 5*time.Second, "a's dial of b to run its course", func() bool {
		m := a.metrics
		return m.Get("dial.attempt") >= 1 && (m.Get("link.up") >= 2 || m.Get("link.duplicate") >= 1 || m.Get("dial.failed") >= 1)
	})
	waitFor(t, 5*time.Second, "one link, the same at both ends", func() bool {
		pa, pb := a.Backend().PeerList(), b.Backend().PeerList()
		return len(pa) == 1 && len(pb) == 1 && (pa[0].Direction == "outbound") != (pb[0].Direction == "outbound")
	})
	pa, pb := a.Backend().PeerList(), b.Backend().PeerList()
	if len(pa) != 1 || len(pb) != 1 {
		t.Fatalf("links: a has %d, b has %d; want 1 each", len(pa), len(pb))
	}
	// Both ends keep the same link: a's outbound is b's inbound or vice versa.
	if (pa[0].Direction == "outbound") == (pb[0].Direction == "outbound") {
		t.Fatalf("ends disagree on the surviving link: a %s, b %s", pa[0].Direction, pb[0].Direction)
	}
}

func TestNonMemberRejected(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	// Node 2 holds its own roster (which lists it), but a's roster lacks it.
	small, err := roster.New("acme", m.ids[0].Key, "a")
	if err != nil {
		t.Fatal(err)
	}
	m.writeRoster(0, small)
	m.writeRoster(2, m.roster)
	a := m.start(0)
	c := m.start(2, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "rejection counted", func() bool {
		return a.metrics.Get("handshake.rejected.not_member") > 0
	})
	if linked(a, m.ids[2].Pub) {
		t.Fatal("non-member was admitted")
	}
	// The dialer's handshake completes when it sends its last message, so
	// it may hold the link for a moment until the refusal closes it.
	waitFor(t, 5*time.Second, "refused link to close on the dialer", func() bool { return !linked(c, m.ids[0].Pub) })
}

func TestDifferentOrgFailsHandshake(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	other, err := roster.New("other-org", m.ids[1].Key, "b")
	if err != nil {
		t.Fatal(err)
	}
	m.writeRoster(1, other)
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "b's dial across orgs to fail", func() bool { return b.metrics.Get("dial.failed") > 0 })
	if linked(a, m.ids[1].Pub) || linked(b, m.ids[0].Pub) {
		t.Fatal("nodes of different orgs linked")
	}
}

func TestRosterPushFromNewerSideAndRollbackRefused(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	v2 := m.roster // members a, b, c
	// Build v3: same members, c promoted to operator.
	v3 := v2.Next()
	if err := v3.SetRole(m.ids[2].Pub, roster.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if err := v3.Sign(m.ids[0].Key); err != nil {
		t.Fatal(err)
	}
	m.writeRoster(0, v3)
	m.writeRoster(1, v2)
	m.writeRoster(2, v2)
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	c := m.start(2, tcpAddr(t, b)) // c only reaches a through b's gossip
	waitFor(t, 10*time.Second, "roster v3 everywhere", func() bool {
		return b.Roster().Version == v3.Version && c.Roster().Version == v3.Version
	})
	// Persisted (the save follows the in-memory swap).
	waitFor(t, 5*time.Second, "c persisted v3", func() bool {
		got, err := (home.Home{Dir: m.home(2)}).LoadRoster()
		return err == nil && got.Version == v3.Version
	})
	// Publishing the older version is a rollback.
	old, _ := v2.Encode()
	_, err := c.roster.PublishRoster(old)
	if !errors.Is(err, roster.ErrRollback) {
		t.Fatalf("publish of v2 over v3: %v, want rollback", err)
	}
	if c.metrics.Get("roster.rejected.rollback") == 0 {
		t.Fatal("rollback not counted")
	}
}

func TestPublishSpreadsAndRemovedMemberDisconnected(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 3)
	for i := range 3 {
		m.writeRoster(i, m.roster)
	}
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	c := m.start(2, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "full mesh", func() bool {
		return len(a.Backend().PeerList()) == 2 && len(b.Backend().PeerList()) == 2 && len(c.Backend().PeerList()) == 2
	})
	next := m.roster.Next()
	if err := next.Remove(m.ids[2].Pub); err != nil {
		t.Fatal(err)
	}
	if err := next.Sign(m.ids[0].Key); err != nil {
		t.Fatal(err)
	}
	doc, _ := next.Encode()
	// Publish through the control socket, as meshctl does, on b (not the admin).
	cl := api.NewClient(b.ControlSocket())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.PublishRoster(ctx, doc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a has the new roster and c is gone", func() bool {
		return a.Roster().Version == next.Version && !linked(a, m.ids[2].Pub) && !linked(b, m.ids[2].Pub)
	})
	// c does not get back in: it learns (on its link, or from the roster
	// a member pushes when it refuses c's redial) that it was removed, and
	// holds no link then.
	waitFor(t, 10*time.Second, "c knows it was removed and holds no link", func() bool {
		return c.peers.RemovedSelf() && len(c.Backend().PeerList()) == 0
	})
	if linked(a, m.ids[2].Pub) || linked(b, m.ids[2].Pub) {
		t.Fatal("removed member relinked")
	}
	// A refused publish names its reason through the API.
	_, err := cl.PublishRoster(ctx, doc)
	var re *api.RemoteError
	if !errors.As(err, &re) || re.Status != 409 {
		t.Fatalf("republish: %v, want a 409 refusal", err)
	}
}

func TestUnixLinkPreferredOnSameHost(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	cfg := func(i int) Config {
		c := DefaultConfig()
		c.Home = m.home(i)
		c.MDNS = false
		c.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
		c.DialBackoffMin = 50 * time.Millisecond
		c.Logger = testLogger(t)
		return c
	}
	ca := cfg(0)
	a, err := New(ca)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// b learns a's addresses (tcp and unix) as a's own claim over a link
	// from this host (a Unix socket address is taken from nothing else).
	cb := cfg(1)
	b, err := New(cb)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.peers.Lock()
	_, _ = b.peers.MergeAddrsLocked(m.ids[0].Pub, a.payload().Listen, peers.SelfLocal)
	b.peers.Unlock()
	b.peers.Wake()
	waitFor(t, 5*time.Second, "link", func() bool { return linked(b, m.ids[0].Pub) })
	p := b.Backend().PeerList()[0]
	if p.Network != "unix" {
		t.Fatalf("link via %s, want unix", p.Network)
	}
}

func TestCloseIdempotentAndLockReleased(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 1)
	m.writeRoster(0, m.roster)
	a := m.start(0)
	// A second node on the same home is refused.
	cfg := DefaultConfig()
	cfg.Home = m.home(0)
	cfg.MDNS = false
	if _, err := New(cfg); !errors.Is(err, home.ErrLocked) {
		t.Fatalf("second node on one home: %v, want ErrLocked", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("restart after close: %v", err)
	}
	b.Close()
}
