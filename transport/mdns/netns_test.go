//go:build linux

package mdns

// Multi-host tests: the test binary re-executes itself inside network
// namespaces (internal/netnstest) as a small node that advertises and browses,
// prints what it finds as JSON lines on stdout and obeys commands on stdin.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/proto"
)

// nodeEnv carries a nodeSpec to the re-executed test binary.
const nodeEnv = "MESHD_MDNS_TEST_NODE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(nodeEnv); spec != "" {
		os.Exit(runTestNode(spec))
	}
	os.Exit(m.Run())
}

// nodeSpec configures one test node.
type nodeSpec struct {
	Seed          byte
	Org           string
	Port          int
	RosterVersion uint64
	Interval      time.Duration
	Timeout       time.Duration
	RefreshEvery  int
	// Iface names the interface; empty lets New choose.
	Iface string
}

// nodeEvent is one JSON line from a test node.
type nodeEvent struct {
	Event  string `json:"event"` // ready, error, peer, closed
	Iface  string `json:"iface,omitempty"`
	Family string `json:"family,omitempty"`
	Err    string `json:"err,omitempty"`
	// NoMulticast is set on error events that are ErrNoMulticast.
	NoMulticast bool   `json:"no_multicast,omitempty"`
	Peer        *Peer  `json:"peer,omitempty"`
	Leaked      string `json:"leaked,omitempty"`

	node int       // set by the reader in the parent
	at   time.Time // ditto
}

// runTestNode is the main of a test node. It runs until stdin closes (or a
// minute passes, should the parent vanish) and then checks that Close left
// no goroutines behind.
func runTestNode(specJSON string) int {
	var spec nodeSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "node: bad spec:", err)
		return 2
	}
	out := json.NewEncoder(os.Stdout)
	emit := func(e nodeEvent) {
		if err := out.Encode(e); err != nil {
			os.Exit(3) // the parent is gone
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var ifi *net.Interface
	if spec.Iface != "" {
		var err error
		if ifi, err = net.InterfaceByName(spec.Iface); err != nil {
			emit(nodeEvent{Event: "error", Err: err.Error()})
			return 1
		}
	}
	d, err := New(Config{
		Interface:     ifi,
		Key:           testKey(spec.Seed),
		Org:           spec.Org,
		Port:          spec.Port,
		RosterVersion: spec.RosterVersion,
		QueryInterval: spec.Interval,
		QueryTimeout:  spec.Timeout,
		RefreshEvery:  spec.RefreshEvery,
		Logger:        logger,
	})
	if err != nil {
		emit(nodeEvent{Event: "error", Err: err.Error(), NoMulticast: errors.Is(err, ErrNoMulticast)})
		return 1
	}
	emit(nodeEvent{Event: "ready", Iface: d.Interface().Name, Family: d.probeFamily().String()})

	stdinDone := make(chan struct{})
	rvs := make(chan uint64, 8)
	go func() {
		defer close(stdinDone)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "rv "); ok {
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					rvs <- n
				}
			}
		}
	}()
	safety := time.After(time.Minute)
loop:
	for {
		select {
		case p, ok := <-d.Peers():
			if !ok {
				emit(nodeEvent{Event: "error", Err: "Peers closed before Close"})
				return 1
			}
			emit(nodeEvent{Event: "peer", Peer: &p})
		case v := <-rvs:
			if err := d.SetRosterVersion(v); err != nil {
				emit(nodeEvent{Event: "error", Err: err.Error()})
			}
		case <-stdinDone:
			break loop
		case <-safety:
			break loop
		}
	}
	if err := d.Close(); err != nil {
		emit(nodeEvent{Event: "error", Err: "Close: " + err.Error()})
	}
	d.Close() // idempotent
	for range d.Peers() {
		// Close must close it; this would hang otherwise.
	}
	emit(nodeEvent{Event: "closed", Leaked: waitNoLeaks(3 * time.Second)})
	return 0
}

// testNode is a running test node, seen from the parent.
type testNode struct {
	idx    int
	spec   nodeSpec
	host   netnstest.Host
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
}

// cluster runs test nodes on a netnstest.Net and gathers their events.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	net    *netnstest.Net
	nodes  []*testNode
	events chan nodeEvent
	wg     sync.WaitGroup // stdout readers
}

func newCluster(t *testing.T, n *netnstest.Net, limit time.Duration) *cluster {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	c := &cluster{t: t, ctx: ctx, net: n, events: make(chan nodeEvent, 1024)}
	t.Cleanup(func() {
		cancel() // kills nodes still running
		for _, nd := range c.nodes {
			nd.cmd.Wait()
		}
		c.wg.Wait()
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("node %d (%s) stderr:\n%s", nd.idx, nd.host.IP, nd.stderr.String())
			}
		}
	})
	return c
}

// start launches a node on host i.
func (c *cluster) start(i int, spec nodeSpec) *testNode {
	c.t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		c.t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	h := c.net.Host(i)
	cmd := h.Command(c.ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(js))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	nd := &testNode{idx: len(c.nodes), spec: spec, host: h, cmd: cmd, stdin: stdin, stderr: &syncBuffer{}}
	cmd.Stderr = nd.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes = append(c.nodes, nd)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e nodeEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = nodeEvent{Event: "error", Err: fmt.Sprintf("bad line %q: %v", sc.Text(), err)}
			}
			e.node, e.at = nd.idx, time.Now()
			select {
			case c.events <- e:
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return nd
}

// next returns the next event, failing the test at the deadline.
func (c *cluster) next(deadline time.Time, what string) nodeEvent {
	c.t.Helper()
	select {
	case e := <-c.events:
		if e.Event == "error" {
			c.t.Fatalf("node %d: %s", e.node, e.Err)
		}
		return e
	case <-time.After(time.Until(deadline)):
		c.t.Fatalf("timed out waiting for %s", what)
	case <-c.ctx.Done():
		c.t.Fatalf("test context ended waiting for %s", what)
	}
	panic("unreachable")
}

// waitReady waits for node nd's ready event and returns it.
func (c *cluster) waitReady(nd *testNode) nodeEvent {
	c.t.Helper()
	e := c.next(time.Now().Add(30*time.Second), fmt.Sprintf("node %d to start", nd.idx))
	if e.node != nd.idx || e.Event != "ready" {
		c.t.Fatalf("want ready from node %d, got %+v", nd.idx, e)
	}
	return e
}

// stop closes every node's stdin and checks each closes cleanly.
func (c *cluster) stop() {
	c.t.Helper()
	for _, nd := range c.nodes {
		nd.stdin.Close()
	}
	closed := map[int]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(closed) < len(c.nodes) {
		e := c.next(deadline, "nodes to close")
		if e.Event != "closed" {
			continue
		}
		closed[e.node] = true
		if e.Leaked != "" {
			c.t.Errorf("node %d leaked goroutines:\n%s", e.node, e.Leaked)
		}
	}
	for _, nd := range c.nodes {
		if err := nd.cmd.Wait(); err != nil {
			c.t.Errorf("node %d: %v", nd.idx, err)
		}
	}
}

// readyClock times discovery from the moment the last of n nodes is up, so
// slow process start on a loaded machine does not count against the 10 s
// discovery bound; starting gets 30 s of its own.
type readyClock struct {
	n, ready      int
	launch, allUp time.Time
}

func newReadyClock(n int) *readyClock { return &readyClock{n: n, launch: time.Now()} }

func (r *readyClock) event(e nodeEvent) {
	if e.Event == "ready" {
		if r.ready++; r.ready == r.n {
			r.allUp = e.at
		}
	}
}

func (r *readyClock) deadline() time.Time {
	if r.ready < r.n {
		return r.launch.Add(30 * time.Second)
	}
	return r.allUp.Add(10 * time.Second)
}

func (r *readyClock) String() string {
	return fmt.Sprintf("%v after the last node was up (%v after launch)",
		time.Since(r.allUp).Round(time.Millisecond), time.Since(r.launch).Round(time.Millisecond))
}

func skipUnlessNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-host test skipped in -short mode")
	}
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
}

// TestNetnsDiscovery runs three hosts on a bridge, each with a node of org
// acme, and a node of org other beside acme's on host 0 (so two nodes
// share port 5353 there). Each acme node must see exactly the other two
// within 10 s, report each once, and see a roster version change; nobody
// may see across orgs.
func TestNetnsDiscovery(t *testing.T) {
	t.Parallel()
	skipUnlessNetns(t)
	n := netnstest.NewBridge(t, 3)
	c := newCluster(t, n, 60*time.Second)
	spec := func(seed byte, org string) nodeSpec {
		return nodeSpec{Seed: seed, Org: org, Port: 7000 + int(seed), RosterVersion: 1,
			Interval: time.Second, Timeout: 500 * time.Millisecond, RefreshEvery: 1000}
	}
	// The other org's node is up and answering before acme starts
	// querying, so its absence below is the filter's doing.
	other := c.start(0, spec(9, "other"))
	c.waitReady(other)

	clock := newReadyClock(3)
	acme := []*testNode{c.start(0, spec(0, "acme")), c.start(1, spec(1, "acme")), c.start(2, spec(2, "acme"))}
	ready := 0
	// seen[i][j]: reports of node j received by node i, in order.
	seen := map[int]map[int][]Peer{}
	byKey := map[proto.PubKey]int{}
	for _, nd := range append(acme, other) {
		seen[nd.idx] = map[int][]Peer{}
		byKey[testKey(nd.spec.Seed)] = nd.idx
	}
	record := func(e nodeEvent) {
		switch e.Event {
		case "ready":
			ready++
			if e.Iface != netnstest.HostIface || e.Family != "IPv4" {
				t.Errorf("node %d: ready on %s over %s, want %s over IPv4", e.node, e.Iface, e.Family, netnstest.HostIface)
			}
		case "peer":
			j, ok := byKey[e.Peer.Key]
			if !ok {
				t.Fatalf("node %d saw unknown key %s", e.node, e.Peer.Key)
			}
			if c.nodes[j].spec.Org != c.nodes[e.node].spec.Org {
				t.Fatalf("node %d (org %s) saw node %d of org %s", e.node, c.nodes[e.node].spec.Org, j, e.Peer.Org)
			}
			if j == e.node {
				t.Fatalf("node %d reported itself", e.node)
			}
			seen[e.node][j] = append(seen[e.node][j], *e.Peer)
		}
	}
	all := func() bool {
		for _, nd := range acme {
			if len(seen[nd.idx]) != 2 {
				return false
			}
		}
		return ready == 3
	}
	for !all() {
		e := c.next(clock.deadline(), "all acme nodes to see each other")
		clock.event(e)
		record(e)
	}
	t.Logf("3 nodes saw each other %v", clock)

	for _, nd := range acme {
		for j, ps := range seen[nd.idx] {
			p := ps[0]
			h := c.nodes[j]
			want := fmt.Sprintf("tcp://%s:%d", h.host.IP, h.spec.Port)
			if len(p.Addrs) != 1 || p.Addrs[0] != want || p.Org != "acme" || p.RosterVersion != 1 ||
				p.ProtoVersion != proto.ProtocolVersion || p.Host == "" || p.Seen.IsZero() {
				t.Errorf("node %d saw node %d as %+v; want address %s", nd.idx, j, p, want)
			}
		}
	}

	// A new roster version reaches the others at their next query.
	rvStart := time.Now()
	changer := acme[0].idx
	fmt.Fprintln(acme[0].stdin, "rv 42")
	has42 := func(i int) bool {
		ps := seen[i][changer]
		return len(ps) > 0 && ps[len(ps)-1].RosterVersion == 42
	}
	for !has42(acme[1].idx) || !has42(acme[2].idx) {
		record(c.next(rvStart.Add(10*time.Second), "roster version 42 to be seen"))
	}
	t.Logf("roster version change seen after %v", time.Since(rvStart).Round(time.Millisecond))

	// Let a few more queries run: unchanged peers are not reported again
	// (RefreshEvery is large), and the other org stays invisible.
	settle := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(settle) {
		select {
		case e := <-c.events:
			if e.Event == "error" {
				t.Fatalf("node %d: %s", e.node, e.Err)
			}
			record(e)
		case <-time.After(time.Until(settle)):
		}
	}
	for _, nd := range acme {
		for j, ps := range seen[nd.idx] {
			want := 1
			if j == changer {
				want = 2 // rv 1, then rv 42
			}
			if len(ps) != want {
				t.Errorf("node %d reported node %d %d times, want %d", nd.idx, j, len(ps), want)
			}
		}
	}
	if len(seen[other.idx]) != 0 {
		t.Errorf("node of org other saw %d acme nodes", len(seen[other.idx]))
	}
	c.stop()
}

// TestNetnsDiscoveryWithoutMulticastRoute shows discovery working when
// hosts lack a multicast route: those query over IPv6 while a host with
// the route queries over IPv4, and all answer each other.
func TestNetnsDiscoveryWithoutMulticastRoute(t *testing.T) {
	t.Parallel()
	skipUnlessNetns(t)
	n := netnstest.NewBridge(t, 3, netnstest.WithoutMulticastRoute())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := n.Host(0).Command(ctx, "ip", "route", "add", "224.0.0.0/4", "dev", netnstest.HostIface).CombinedOutput(); err != nil {
		t.Fatalf("adding the route to host 0: %v: %s", err, out)
	}
	c := newCluster(t, n, 60*time.Second)
	clock := newReadyClock(3)
	for i := range 3 {
		c.start(i, nodeSpec{Seed: byte(i), Org: "acme", Port: 7000, Interval: 2 * time.Second, Timeout: 500 * time.Millisecond})
	}
	families := map[int]string{}
	seen := map[int]map[proto.PubKey]bool{0: {}, 1: {}, 2: {}}
	for len(families) < 3 || len(seen[0]) < 2 || len(seen[1]) < 2 || len(seen[2]) < 2 {
		e := c.next(clock.deadline(), "all nodes to see each other without a multicast route")
		clock.event(e)
		switch e.Event {
		case "ready":
			families[e.node] = e.Family
		case "peer":
			seen[e.node][e.Peer.Key] = true
		}
	}
	t.Logf("without a multicast route: all saw each other %v", clock)
	if families[0] != "IPv4" || families[1] != "IPv6" || families[2] != "IPv6" {
		t.Errorf("query families %v; want IPv4 with the route, IPv6 without", families)
	}
	c.stop()
}

// TestNetnsNoMulticast checks the clear error when neither family can
// join: no multicast route and IPv6 disabled.
func TestNetnsNoMulticast(t *testing.T) {
	t.Parallel()
	skipUnlessNetns(t)
	n := netnstest.NewBridge(t, 1, netnstest.WithoutMulticastRoute())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	disable := "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6"
	if out, err := n.Host(0).Command(ctx, "sh", "-c", disable).CombinedOutput(); err != nil {
		t.Fatalf("disabling IPv6: %v: %s", err, out)
	}
	c := newCluster(t, n, 60*time.Second)
	c.start(0, nodeSpec{Seed: 1, Org: "acme", Port: 7000})
	select {
	case e := <-c.events:
		if e.Event != "error" || !e.NoMulticast {
			t.Fatalf("got %+v; want an ErrNoMulticast error", e)
		}
		t.Logf("New: %s", e.Err)
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for the node to fail")
	}
	if err := c.nodes[0].cmd.Wait(); err == nil {
		t.Error("node exited 0 after failing")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNetnsLoopback runs two nodes on one host with loopback chosen
// explicitly, as tests of a whole daemon on one machine would.
func TestNetnsLoopback(t *testing.T) {
	t.Parallel()
	skipUnlessNetns(t)
	n := netnstest.NewBridge(t, 1)
	c := newCluster(t, n, 60*time.Second)
	clock := newReadyClock(2)
	for seed := range byte(2) {
		c.start(0, nodeSpec{Seed: seed, Org: "acme", Port: 7000 + int(seed), Iface: "lo",
			Interval: time.Second, Timeout: 300 * time.Millisecond})
	}
	seen := map[int]*Peer{}
	ready := 0
	for ready < 2 || len(seen) < 2 {
		e := c.next(clock.deadline(), "both loopback nodes to see each other")
		clock.event(e)
		switch e.Event {
		case "ready":
			ready++
			if e.Iface != "lo" {
				t.Errorf("node %d on %s, want lo", e.node, e.Iface)
			}
		case "peer":
			seen[e.node] = e.Peer
		}
	}
	t.Logf("loopback nodes saw each other %v", clock)
	for i, p := range seen {
		want := fmt.Sprintf("tcp://127.0.0.1:%d", 7000+1-i)
		if len(p.Addrs) != 1 || p.Addrs[0] != want {
			t.Errorf("node %d saw %v, want %s", i, p.Addrs, want)
		}
	}
	c.stop()
}
