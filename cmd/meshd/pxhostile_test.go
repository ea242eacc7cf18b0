package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Hostile tests of the peer-exchange caps (PROTOCOL.md §14.4, SECURITY.md
// "Hostile peers"): a roster member, linked through the project's own
// transport, drives a real meshd with peer-update frames no honest node
// sends, and each test checks what the node does about it from the
// outside: counters, /proc, the dials it makes, and an honest member
// that still links.

// pxRig is a real meshd (org "acme") whose roster lists the raw members
// "hostile" and "watcher" (the test holds their keys) and "bob", an
// honest member with a home of its own that the test may start as a
// second meshd.
type pxRig struct {
	*rawTarget            // the hostile member
	watcher    *rawTarget // an honest raw member
	meshd      string
	bobHome    string
	bob        proto.PubKey
	pinned     string // the roster, for bob's --roster
}

func startPXRig(t *testing.T, args ...string) *pxRig {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	wpub, wkey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &pxRig{
		rawTarget: &rawTarget{meshctl: meshctl, home: filepath.Join(tmp, "target"), pub: proto.PubKey(pub), key: key},
		meshd:     meshd,
		bobHome:   filepath.Join(tmp, "bob"),
	}
	var id struct {
		Key string `json:"key"`
	}
	meshctlJSON(t, meshctl, &id, "--home", r.bobHome, "init", "--name", "bob")
	if r.bob, err = proto.ParsePubKey(id.Key); err != nil {
		t.Fatal(err)
	}
	meshctlOK(t, meshctl, "--home", r.home, "init")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "add", r.pub.String(), "--role", "member", "--name", "hostile")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "add", r.bob.String(), "--role", "member", "--name", "bob")
	meshctlOK(t, meshctl, "--home", r.home, "roster", "add", proto.PubKey(wpub).String(), "--role", "member", "--name", "watcher")
	b, err := os.ReadFile(filepath.Join(r.home, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	r.pinned = filepath.Join(tmp, "roster.cbor")
	if err := os.WriteFile(r.pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.d = startDaemon(t, meshd, r.home, append([]string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}, args...)...)
	r.status = waitStatus(t, meshctl, r.home, r.d)
	if r.target, err = proto.ParsePubKey(r.status.Key); err != nil {
		t.Fatal(err)
	}
	w := *r.rawTarget
	w.pub, w.key = proto.PubKey(wpub), wkey
	r.watcher = &w
	return r
}

// pxConn is the hostile member's link, counting what the node sends it.
type pxConn struct {
	m      *rawTarget
	l      *transport.Link
	frames [16]atomic.Int64 // by frame type
	mu     sync.Mutex
	acked  map[uuid.UUID]bool        // guarded by mu
	addrs  map[proto.PubKey][]string // the node's list as told; guarded by mu
	seq    uint64
	epoch  uuid.UUID
}

// link dials the node as the hostile member (see linkAs).
func (r *pxRig) link(t *testing.T) *pxConn { return linkAs(t, r.rawTarget) }

// linkAs dials the node as raw member m, waits for the node's link-up
// frames (its whole list, then a peer-update saying it speaks them) and
// answers in kind, so that what the test counts afterwards is the
// attack's doing.
func linkAs(t *testing.T, m *rawTarget) *pxConn {
	t.Helper()
	c := &pxConn{m: m, l: m.dial(t, 10*time.Second), acked: map[uuid.UUID]bool{}, addrs: map[proto.PubKey][]string{}, epoch: proto.NewEpoch()}
	t.Cleanup(func() { c.l.Close() })
	c.l.Start(func(f []byte) {
		if len(f) == 0 || int(f[0]) >= len(c.frames) {
			return
		}
		c.mu.Lock()
		switch proto.FrameType(f[0]) {
		case proto.FrameAck:
			if a, err := proto.ParseAck(f[1:]); err == nil {
				for _, id := range a.IDs {
					c.acked[id] = true
				}
			}
		case proto.FramePeers:
			if l, err := proto.ParsePeerList(f[1:]); err == nil {
				clear(c.addrs)
				for _, p := range l.Peers {
					c.addrs[p.Key] = p.Addrs
				}
			}
		case proto.FramePeerUpdate:
			if u, err := proto.ParsePeerUpdate(f[1:]); err == nil {
				for _, k := range u.Removed {
					delete(c.addrs, k)
				}
				for _, p := range u.Set {
					c.addrs[p.Key] = p.Addrs
				}
			}
		}
		c.mu.Unlock()
		c.frames[f[0]].Add(1)
	})
	waitFor(t, "the node's peer-update at link-up", 10*time.Second, func() bool {
		return c.frames[proto.FramePeerUpdate].Load() >= 1
	})
	// Speak peer-update (an empty list, so a zero digest): the node then
	// sends this link changes and digests, and a whole list only when
	// asked, not at every interval as to an older peer.
	c.sendUpdate(t, &proto.PeerUpdate{Set: []proto.PeerInfo{}, Removed: []proto.PubKey{}, Digest: make([]byte, proto.PeerDigestSize)})
	c.barrier(t)
	return c
}

func (c *pxConn) count(ft proto.FrameType) int64 { return c.frames[ft].Load() }

// told returns the addresses the node last told this link k is at.
func (c *pxConn) told(k proto.PubKey) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[k]
}

// send sends one frame of type ft, waiting for room in the send queue.
func (c *pxConn) send(t *testing.T, ft proto.FrameType, payload []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.l.SendWait(ctx, append([]byte{byte(ft)}, payload...)); err != nil {
		t.Fatalf("send %v: %v", ft, err)
	}
}

func (c *pxConn) sendUpdate(t *testing.T, u *proto.PeerUpdate) {
	t.Helper()
	b, err := proto.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	c.send(t, proto.FramePeerUpdate, b)
}

// barrier sends the node a DM and waits for its ack. The node reads a
// link's frames in order and queues what it sends on one link in order,
// so once the ack is in, every frame the node sent in answer to what
// was sent before the DM is in too.
func (c *pxConn) barrier(t *testing.T) {
	t.Helper()
	c.seq++
	se, err := proto.SignEnvelope(c.m.key, &proto.Envelope{ID: proto.NewID(), From: c.m.pub, To: proto.ToPeer(c.m.target),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 3600, Seq: c.seq, Epoch: c.epoch,
		Message: &proto.Message{Body: fmt.Sprintf("barrier %d", c.seq)}})

	if err != nil {
		t.Fatal(err)
	}
	c.send(t, proto.FrameEnvelope, se.Raw)
	waitFor(t, "the ack of a DM sent after the attack", 20*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.acked[se.ID]
	})
}

// randomKey returns a key no roster holds.
func randomKey(t *testing.T) proto.PubKey {
	var k proto.PubKey
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return k
}

func randomDigest(t *testing.T) []byte {
	k := randomKey(t)
	return k[:]
}

// pxRSS returns the VmRSS and VmHWM of pid in MiB, from
// /proc/PID/status; it skips the test where there is no /proc.
func pxRSS(t *testing.T, pid int) (rss, hwm float64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		if _, statErr := os.Stat("/proc/self/status"); statErr != nil {
			t.Skip("no /proc: RSS cannot be measured here")
		}
		t.Fatal(err)
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss, found = kb/1024, found+1
		case "VmHWM":
			hwm, found = kb/1024, found+1
		}
	}
	if found != 2 {
		t.Fatalf("/proc/%d/status lacks VmRSS or VmHWM:\n%s", pid, b)
	}
	return rss, hwm
}

// TestPeerUpdateFloodBounded: a member sends 400,000 peer-update entries
// for keys no roster lists (half of them a fixed set sent again and
// again, half fresh random keys every frame), then 40,000 more in whole
// lists, each with an address that is a listener the test watches. The node counts every entry
// (peers.ignored.not_member), keeps its copy of the member's list within
// max(64, 2 × members) entries so its memory stays flat, and never dials
// an address given for a non-member, while it still dials an address
// gossiped for a member; its status page's link graph names members only.
func TestPeerUpdateFloodBounded(t *testing.T) {
	r := startPXRig(t, "--http", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	c := r.link(t)
	pid := r.d.cmd.Process.Pid
	trap := newTrap(t, "tcp", "127.0.0.2:0")
	trapAddr := []string{"tcp://" + trap.ln.Addr().String()}

	// 100 peer-updates, then 10 whole lists (peers frames), of 4,000
	// entries each: under proto.MaxArrayElements (4,096).
	const updates, lists, perFrame = 100, 10, 4000
	const frames, entries = updates + lists, (updates + lists) * perFrame
	fixed := make([]proto.PubKey, perFrame)
	for i := range fixed {
		fixed[i] = randomKey(t)
	}
	type frame struct {
		ft proto.FrameType
		b  []byte
	}
	payloads := make([]frame, 0, frames)
	for f := range frames {
		set := make([]proto.PeerInfo, perFrame)
		for i := range set {
			k := fixed[i]
			if f%2 == 1 || f >= updates {
				k = randomKey(t)
			}
			set[i] = proto.PeerInfo{Key: k, Addrs: trapAddr}
		}
		var v any = &proto.PeerUpdate{Set: set, Removed: []proto.PubKey{}, Digest: randomDigest(t)}
		ft := proto.FramePeerUpdate
		if f >= updates {
			v, ft = &proto.PeerList{Peers: set}, proto.FramePeers
		}
		b, err := proto.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, frame{ft, b})
	}

	before := counters(t, r.meshctl, r.home)
	rss0, _ := pxRSS(t, pid)
	cpu0, _ := procCPU(pid)
	start := time.Now()
	bytes := 0
	for _, f := range payloads {
		c.send(t, f.ft, f.b)
		bytes += len(f.b)
	}
	var after map[string]uint64
	waitFor(t, "the node to take in every entry", 45*time.Second, func() bool {
		after = counters(t, r.meshctl, r.home)
		return after["peers.ignored.not_member"]-before["peers.ignored.not_member"] >= entries
	})
	took := time.Since(start)
	cpu1, _ := procCPU(pid)
	rss1, hwm := pxRSS(t, pid)

	// A member's address, gossiped after the flood: the node dials it, so
	// its dialler ran after it had read every non-member's address.
	control := newTrap(t, "tcp", "127.0.0.3:0")
	c.sendUpdate(t, &proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.bob, Addrs: []string{"tcp://" + control.ln.Addr().String()}}},
		Removed: []proto.PubKey{}, Digest: randomDigest(t)})
	waitFor(t, "a dial of the address gossiped for bob", 20*time.Second, func() bool { return control.hits.Load() > 0 })
	after = counters(t, r.meshctl, r.home)

	graph, stateBytes := pxGraph(t, r)

	ignored := after["peers.ignored.not_member"] - before["peers.ignored.not_member"]
	t.Logf("status page state %d bytes, its graph %d nodes and %d edges", stateBytes, len(graph.Nodes), len(graph.Edges))
	t.Logf("%d peer-update and %d peers frames (%.1f MB) holding %d entries for non-members, taken in %v using %v of CPU: "+
		"peers.ignored.not_member +%d, peers.malformed %d, RSS %.1f -> %.1f MiB (peak %.1f), dials of non-members' address %d, of bob's %d",
		updates, lists, float64(bytes)/1e6, entries, took.Round(time.Millisecond), cpu1-cpu0, ignored, after["peers.malformed"],
		rss0, rss1, hwm, trap.hits.Load(), control.hits.Load())
	if ignored != entries {
		t.Errorf("peers.ignored.not_member grew by %d, want %d (one per entry)", ignored, entries)
	}
	if n := trap.hits.Load(); n != 0 {
		t.Errorf("the node dialled an address given for non-members %d times", n)
	}
	// 440,000 entries kept would cost the node about 80 MiB (a map entry
	// of a 32-byte key and a 32-byte hash is about 100 bytes in Go); the
	// flood's own frames are garbage once read.
	if grew := rss1 - rss0; grew > 32 {
		t.Errorf("RSS grew by %.1f MiB (%.1f -> %.1f) over the flood", grew, rss0, rss1)
	}
	if after["link.down"] != before["link.down"] {
		t.Errorf("a link went down during the flood: %v", after)
	}
	// The status page's link graph names roster members only: the
	// hostile member is on it, linked, and none of the keys it sent.
	members := map[string]bool{r.target.String(): true, r.pub.String(): true, r.bob.String(): true, r.watcher.pub.String(): true}
	hostileLinked := false
	for _, n := range graph.Nodes {
		if !members[n.Key] {
			t.Errorf("the status page graph has a node for %s, not a member", n.Key)
		}
		hostileLinked = hostileLinked || (n.Key == r.pub.String() && n.Linked)
	}
	for _, e := range graph.Edges {
		if !members[e.A] || !members[e.B] {
			t.Errorf("the status page graph has an edge %s-%s (%s) to a non-member", e.A, e.B, e.Kind)
		}
	}
	if !hostileLinked {
		t.Errorf("the status page graph does not show the hostile member linked: %+v", graph.Nodes)
	}
}

// pxGraph is the link graph of r's status page (GET /api/state), and
// the size of the whole state in bytes.
func pxGraph(t *testing.T, r *pxRig) (g struct {
	Nodes []struct {
		Key    string `json:"key"`
		Linked bool   `json:"linked"`
	} `json:"nodes"`
	Edges []struct {
		A    string `json:"a"`
		B    string `json:"b"`
		Kind string `json:"kind"`
	} `json:"edges"`
}, size int) {
	t.Helper()
	ui := uiOf(t, r.meshctl, r.home)
	req, err := http.NewRequest(http.MethodGet, ui.Address+"api/state", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ui.Token)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/state: %d, %v", resp.StatusCode, err)
	}
	var st struct {
		Graph json.RawMessage `json:"graph"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("GET /api/state: %v", err)
	}
	if err := json.Unmarshal(st.Graph, &g); err != nil {
		t.Fatalf("GET /api/state graph: %v", err)
	}
	return g, len(b)
}

// TestResyncFloodAnsweredOnce: a member asks for the node's whole list
// (a peer-update with resync set) 2,000 times in a row. The node answers
// the first one with a peers frame and no other within
// PeerExchangeInterval (30 s), counts every request
// (peers.resync_asked), and spends little CPU on them.
func TestResyncFloodAnsweredOnce(t *testing.T) {
	r := startPXRig(t)
	c := r.link(t)
	pid := r.d.cmd.Process.Pid
	peers0 := c.count(proto.FramePeers)
	before := counters(t, r.meshctl, r.home)
	cpu0, _ := procCPU(pid)
	const asks = 2000
	b, err := proto.Marshal(&proto.PeerUpdate{Set: []proto.PeerInfo{}, Removed: []proto.PubKey{}, Digest: make([]byte, proto.PeerDigestSize), Resync: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range asks {
		c.send(t, proto.FramePeerUpdate, b)
	}
	sent := time.Since(start)
	c.barrier(t)
	took := time.Since(start)
	cpu1, _ := procCPU(pid)
	after := counters(t, r.meshctl, r.home)
	answers := c.count(proto.FramePeers) - peers0
	asked := after["peers.resync_asked"] - before["peers.resync_asked"]
	t.Logf("%d resync requests sent in %v, all read within %v: peers.resync_asked +%d, whole lists sent back %d, peer-updates sent back %d, node CPU %v",
		asks, sent.Round(time.Millisecond), took.Round(time.Millisecond), asked, answers, c.count(proto.FramePeerUpdate), cpu1-cpu0)
	if asked != asks {
		t.Errorf("peers.resync_asked grew by %d, want %d", asked, asks)
	}
	if took < 30*time.Second && answers != 1 {
		t.Errorf("the node sent %d whole lists for %d requests within %v, want 1 (one per 30 s interval)", answers, asks, took)
	}
	// The CPU bound is loose: a 2-core test machine is shared. What it
	// catches is a node that builds and sends a list per request.
	if cpu1-cpu0 > 5*time.Second {
		t.Errorf("the node spent %v of CPU on %d resync requests", cpu1-cpu0, asks)
	}
}

// TestGossipedBadAddrsEvicted: a member tells the node, again and again,
// that bob (a member not running yet) is at a Unix socket, a closed TCP
// port, a port that closes each connection at once and a port that
// accepts and then says nothing. The node never dials the socket
// (addr.ignored), drops each TCP address after three failed dials
// (addr.evicted) and dials none of them again, and when bob starts it
// links to him.
func TestGossipedBadAddrsEvicted(t *testing.T) {
	testpar.First(t)
	r := startPXRig(t)
	c := r.link(t)
	sock := newTrap(t, "unix", filepath.Join(t.TempDir(), "trap.sock"))
	reset := newTrap(t, "tcp", "127.0.0.4:0")
	tarpit, held := newTarpit(t, "127.0.0.5:0")
	closed, err := net.Listen("tcp", "127.0.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	addrs := []string{"unix://" + sock.ln.Addr().String(), "tcp://" + closedAddr,
		"tcp://" + reset.ln.Addr().String(), "tcp://" + tarpit.Addr().String()}

	before := counters(t, r.meshctl, r.home)
	start := time.Now()
	var after map[string]uint64
	sends := 0
	// Each dial round tries the three TCP addresses in turn, the tarpit
	// costing the 5 s dial timeout; three rounds evict them all.
	waitFor(t, "the three TCP addresses evicted", 50*time.Second, func() bool {
		c.sendUpdate(t, &proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.bob, Addrs: addrs}}, Removed: []proto.PubKey{}, Digest: randomDigest(t)})
		sends++
		after = counters(t, r.meshctl, r.home)
		return after["addr.evicted"]-before["addr.evicted"] >= 3
	})
	evictedIn := time.Since(start)
	// More of the same gossip is ignored now: evicted addresses are not
	// taken from a third party again for 10 minutes.
	for range 20 {
		c.sendUpdate(t, &proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.bob, Addrs: addrs}}, Removed: []proto.PubKey{}, Digest: randomDigest(t)})
	}
	c.barrier(t)
	sends += 20
	after = counters(t, r.meshctl, r.home)

	// bob starts, seeded with the node's address, and links.
	bob := startDaemon(t, r.meshd, r.bobHome, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", r.pinned, "--seed", tcpListen(t, r.status))
	waitStatus(t, r.meshctl, r.bobHome, bob)
	bobStart := time.Now()
	waitFor(t, "the node linked to bob", 20*time.Second, func() bool {
		_, ok := peerKeys(t, r.meshctl, r.home)[r.bob.String()]
		return ok
	})
	linkedIn := time.Since(bobStart)
	final := counters(t, r.meshctl, r.home)

	ignored := after["addr.ignored"] - before["addr.ignored"]
	evicted := final["addr.evicted"] - before["addr.evicted"]
	t.Logf("%d peer-updates naming 1 unix + 3 bad tcp addresses for bob: evicted within %v; addr.ignored +%d, addr.evicted +%d; dials of the socket %d, the resetting port %d, the tarpit %d; bob linked %v after starting",
		sends, evictedIn.Round(time.Millisecond), ignored, evicted, sock.hits.Load(), reset.hits.Load(), held.Load(), linkedIn.Round(time.Millisecond))
	if n := sock.hits.Load(); n != 0 {
		t.Errorf("the node dialled a Unix socket named by gossip %d times", n)
	}
	if ignored < uint64(sends) {
		t.Errorf("addr.ignored grew by %d for %d updates, each naming a Unix socket", ignored, sends)
	}
	if n := reset.hits.Load(); n != 3 {
		t.Errorf("the resetting port was dialled %d times, want 3 (evicted after 3 failures)", n)
	}
	if n := held.Load(); n != 3 {
		t.Errorf("the tarpit was dialled %d times, want 3 (evicted after 3 failures)", n)
	}
	if evicted != 3 {
		t.Errorf("addr.evicted grew by %d, want 3", evicted)
	}
	if _, ok := peerKeys(t, r.meshctl, r.home)[r.pub.String()]; !ok {
		t.Errorf("the hostile member's link is gone")
	}
}

// newTarpit listens on addr and holds every connection open without a
// word, as a black hole does to a handshake; it counts the connections.
func newTarpit(t *testing.T, addr string) (net.Listener, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln, &hits
}

// TestMalformedPeerUpdates: a member sends peer-update payloads that do
// not parse (truncated, a digest of the wrong length, arrays declared
// larger than any the decoder takes, too many addresses, unknown
// fields). Each is counted (peers.malformed), the log gets a line for
// the first and then at most one per 10 s, the node does not panic and
// the link stays up: the next valid frame is taken in.
func TestMalformedPeerUpdates(t *testing.T) {
	testpar.Parallel(t)
	r := startPXRig(t)
	c := r.link(t)
	good, err := proto.Marshal(&proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.bob, Addrs: []string{"tcp://127.0.0.7:9"}}},
		Removed: []proto.PubKey{randomKey(t)}, Digest: randomDigest(t)})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([]string, proto.MaxListenAddrs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("tcp://127.0.0.7:%d", 1000+i)
	}
	manyAddrs, err := proto.Marshal(&proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.bob, Addrs: tooMany}}, Removed: []proto.PubKey{}, Digest: randomDigest(t)})
	if err != nil {
		t.Fatal(err)
	}
	shortDigest, err := proto.Marshal(&proto.PeerUpdate{Set: []proto.PeerInfo{}, Removed: []proto.PubKey{}, Digest: make([]byte, proto.PeerDigestSize-1)})
	if err != nil {
		t.Fatal(err)
	}
	overLimit := proto.PeerUpdate{Set: make([]proto.PeerInfo, proto.MaxArrayElements+1), Removed: []proto.PubKey{}, Digest: randomDigest(t)}
	for i := range overLimit.Set {
		overLimit.Set[i] = proto.PeerInfo{Key: randomKey(t), Addrs: []string{}}
	}
	tooLong, err := proto.Marshal(&overLimit)
	if err != nil {
		t.Fatal(err)
	}
	digest := "025820" + strings.Repeat("00", proto.PeerDigestSize)
	bad := map[string][]byte{
		"empty":                 {},
		"truncated":             good[:len(good)/2],
		"digest of 31 bytes":    shortDigest,
		"digest of 0 bytes":     mustHex("a3" + "0080" + "0180" + "0240"),
		"set declared 2^32-1":   mustHex("a3" + "009affffffff"),
		"removed declared 2^64": mustHex("a3" + "0080" + "019bffffffffffffffff"),
		"map declared 2^32-1":   mustHex("baffffffff"),
		"4,097 entries":         tooLong,
		"17 addresses":          manyAddrs,
		"unknown field":         mustHex("a4" + "0080" + "0180" + digest + "0900"),
		"indefinite array":      mustHex("a3" + "009fff" + "0180" + digest),
		"not a map":             mustHex("83010203"),
	}
	before := counters(t, r.meshctl, r.home)
	logBefore := strings.Count(r.d.stderr.String(), "bad peer update")
	const rounds = 50
	sent := 0
	for range rounds {
		for _, p := range bad {
			c.send(t, proto.FramePeerUpdate, p)
			sent++
		}
	}
	// A valid update after the garbage is taken in, on the same link.
	c.send(t, proto.FramePeerUpdate, good)
	var after map[string]uint64
	waitFor(t, "the valid update after the malformed ones", 20*time.Second, func() bool {
		after = counters(t, r.meshctl, r.home)
		return after["peers.updates"] > before["peers.updates"]
	})
	c.barrier(t)
	malformed := after["peers.malformed"] - before["peers.malformed"]
	lines := strings.Count(r.d.stderr.String(), "bad peer update") - logBefore
	t.Logf("%d malformed peer-updates (%d kinds): peers.malformed +%d, %d log lines, link.down +%d",
		sent, len(bad), malformed, lines, after["link.down"]-before["link.down"])
	if malformed != uint64(sent) {
		t.Errorf("peers.malformed grew by %d, want %d", malformed, sent)
	}
	if lines < 1 || lines > 3 {
		t.Errorf("%d log lines for %d malformed updates, want the first and then at most one per 10 s:\n%s", lines, sent, r.d.stderr.String())
	}
	if after["link.down"] != before["link.down"] {
		t.Errorf("a link went down: %v", after)
	}
	if strings.Contains(r.d.stderr.String(), "panic") {
		t.Fatalf("meshd panicked:\n%s", r.d.stderr.String())
	}
	select {
	case <-c.l.Done():
		t.Fatalf("the node closed the link: %v", c.l.Err())
	default:
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestOwnEntryFlapBatched: a member changes the addresses it claims for
// itself hundreds of times over 3 s. Its entry is in the node's list, so
// every change is news for the node's other links; the node gathers
// changes for a second (pxBatch) before it tells them, so an honest
// member linked to it gets about one peer-update a second, not one per
// change, and ends with the last addresses claimed.
func TestOwnEntryFlapBatched(t *testing.T) {
	r := startPXRig(t)
	w := linkAs(t, r.watcher)
	c := r.link(t)
	updates0 := w.count(proto.FramePeerUpdate)
	peers0 := w.count(proto.FramePeers)
	start := time.Now()
	var last string
	// Changes spread over 3 s (up to 1,000 of them), so that a node
	// without batching would tell the watcher of each in its own frame.
	flaps := 0
	for ; flaps < 1000 && time.Since(start) < 3*time.Second; flaps++ {
		last = fmt.Sprintf("tcp://127.0.0.1:%d", 20000+flaps)
		c.sendUpdate(t, &proto.PeerUpdate{Set: []proto.PeerInfo{{Key: r.pub, Addrs: []string{last}}}, Removed: []proto.PubKey{}, Digest: randomDigest(t)})
		time.Sleep(2 * time.Millisecond) // deliberate: the changes are spread over 3 s
	}
	sent := time.Since(start)
	c.barrier(t)
	waitFor(t, "the watcher told the last address claimed", 20*time.Second, func() bool {
		a := w.told(r.pub)
		return len(a) == 1 && a[0] == last
	})
	took := time.Since(start)
	updates := w.count(proto.FramePeerUpdate) - updates0
	lists := w.count(proto.FramePeers) - peers0
	t.Logf("%d changes of the hostile member's own addresses over %v: the watcher got %d peer-updates and %d whole lists within %v",
		flaps, sent.Round(time.Millisecond), updates, lists, took.Round(time.Millisecond))
	// One batch a second, one more for the changes still gathering at
	// the end, and at most one interval round and one resync answer.
	if flaps < 20 {
		t.Fatalf("only %d changes sent in %v: the machine is too busy for this test to mean anything", flaps, sent)
	}
	if limit := int64(took/time.Second) + 4; updates > limit {
		t.Errorf("the watcher got %d peer-updates in %v for %d changes, want at most %d (one a second)", updates, took, flaps, limit)
	}
	if lists > 1 {
		t.Errorf("the watcher got %d whole lists, want at most 1", lists)
	}
}
