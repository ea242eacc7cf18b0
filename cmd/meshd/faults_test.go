//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// Fault tests: partitions, crash loops and floods against real meshd
// processes. Each is bounded in time; together they take about three
// minutes. The partition test needs root (network namespaces) and skips
// without it.

// faultMesh is a set of real meshd processes that a test can kill and
// restart: cmd builds node i's command line afresh for every start.
type faultMesh struct {
	t       *testing.T
	meshctl string
	names   []string
	homes   []string
	keys    []string
	cmd     func(i int) *exec.Cmd
	ds      []*daemon
}

// meshTempDir returns a directory for the homes of a mesh: t.TempDir, or
// a fresh directory under MESHD_BENCH_DIR when that is set. The figures in
// docs/BENCHMARKS.md depend on the file system: every mailbox file is a new
// inode, and on an ext4 whose block groups were just churned by thousands
// of deletions (a test suite's temporary directories) allocating one costs
// ten times what it costs in a quiet directory.
func meshTempDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("MESHD_BENCH_DIR")
	if base == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(base, "mesh-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("MESHD_BENCH_KEEP") == "1" {
		// Deleting tens of thousands of mailbox files makes creating files
		// on this file system slow for minutes after (see BENCHMARKS.md),
		// which would load the next run's figures: keep them, and delete
		// the directory when the series of runs is over.
		t.Logf("keeping %s (MESHD_BENCH_KEEP=1)", dir)
		return dir
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newLoopbackFaultMesh creates homes and a roster (names[0] the admin,
// the others members) and starts one meshd per name on 127.0.0.1. Every
// node seeds the admin's link socket, whose path survives restarts.
func newLoopbackFaultMesh(t *testing.T, names []string, extra ...string) *faultMesh {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	m := &faultMesh{t: t, meshctl: meshctl, names: names}
	tmp := meshTempDir(t)
	for _, n := range names {
		h := filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", h, "init", "--name", n)
		m.homes = append(m.homes, h)
		m.keys = append(m.keys, id.Key)
	}
	meshctlOK(t, meshctl, "--home", m.homes[0], "roster", "init", "--org", "faults")
	for i := 1; i < len(names); i++ {
		meshctlOK(t, meshctl, "--home", m.homes[0], "roster", "add", m.keys[i], "--role", "member", "--name", names[i])
	}
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(m.homes[0], "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m.cmd = func(i int) *exec.Cmd {
		args := append([]string{"--home", m.homes[i], "--listen", "tcp://127.0.0.1:0", "--no-mdns"}, extra...)
		if i > 0 {
			args = append(args, "--roster", pinned, "--seed", "unix://"+filepath.Join(m.homes[0], "link.sock"))
		}
		return exec.Command(meshd, args...)
	}
	m.startAll(15 * time.Second)
	return m
}

// startAll starts every node and waits for a full mesh.
func (m *faultMesh) startAll(within time.Duration) {
	m.t.Helper()
	m.ds = make([]*daemon, len(m.homes))
	for i := range m.homes {
		m.start(i)
	}
	start := time.Now()
	for i := range m.homes {
		waitPeers(m.t, m.meshctl, m.homes[i], len(m.homes)-1, within-time.Since(start))
	}
}

// start starts (or restarts) node i and waits until it answers.
func (m *faultMesh) start(i int) {
	m.t.Helper()
	m.ds[i] = startDaemonCmd(m.t, m.cmd(i), m.homes[i])
	waitStatus(m.t, m.meshctl, m.homes[i], m.ds[i])
}

func (m *faultMesh) ctl(i int, args ...string) string {
	m.t.Helper()
	return meshctlOK(m.t, m.meshctl, append([]string{"--home", m.homes[i]}, args...)...)
}

func (m *faultMesh) client(i int) *api.Client {
	return api.NewClient(filepath.Join(m.homes[i], "meshd.sock"))
}

// channel creates channel ch on the admin (everyone reads and writes it)
// and subscribes every node to it with meshctl.
func (m *faultMesh) channel(ch string, create ...string) {
	m.t.Helper()
	m.ctl(0, append([]string{"channel", "create", ch}, create...)...)
	for i := range m.homes {
		if !testwait.Until(10*time.Second, func() bool {
			return meshctlRun(m.t, m.meshctl, "--home", m.homes[i], "channel", "show", ch).code == 0
		}) {
			m.t.Fatalf("%s never learnt channel %s", m.names[i], ch)
		}
		m.ctl(i, "subscribe", ch)
	}
}

// historyIDs returns the ids of channel ch in node i's store, read with
// meshctl history (the newest 10,000; the tests stay below that).
func (m *faultMesh) historyIDs(i int, ch string) map[string]bool {
	m.t.Helper()
	var h api.History
	meshctlJSON(m.t, m.meshctl, &h, "--home", m.homes[i], "history", "#"+ch, "--limit", strconv.Itoa(api.MaxHistoryLimit))
	return historySet(&h)
}

// historyIDsAPI is historyIDs through the control API: cheaper, for
// polling.
func (m *faultMesh) historyIDsAPI(i int, ch string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := m.client(i).History(ctx, api.HistoryQuery{Channel: ch, Limit: api.MaxHistoryLimit})
	if err != nil {
		return nil, err
	}
	return historySet(h), nil
}

func historySet(h *api.History) map[string]bool {
	out := make(map[string]bool, len(h.Messages))
	for _, x := range h.Messages {
		out[x.ID] = true
	}
	return out
}

// status returns node i's status through the control API.
func (m *faultMesh) status(i int) *api.Status {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := m.client(i).Status(ctx)
	if err != nil {
		m.t.Fatalf("%s: status: %v", m.names[i], err)
	}
	return s
}

// faultIDs is a set of envelope ids with the time each was sent, shared
// by goroutines.
type faultIDs struct {
	mu  sync.Mutex
	ids map[string]time.Time // guarded by mu
}

func newFaultIDs() *faultIDs { return &faultIDs{ids: map[string]time.Time{}} }

func (s *faultIDs) add(id string, at time.Time) {
	s.mu.Lock()
	s.ids[id] = at
	s.mu.Unlock()
}

func (s *faultIDs) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// set returns the ids sent at or after since.
func (s *faultIDs) set(since time.Time) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for id, at := range s.ids {
		if !at.Before(since) {
			out[id] = true
		}
	}
	return out
}

// absent returns the ids of want that got lacks.
func absent(want, got map[string]bool) []string {
	var out []string
	for id := range want {
		if !got[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func sameSet(a, b map[string]bool) bool {
	return len(a) == len(b) && len(absent(a, b)) == 0
}

// counterDiff returns after - before for the counters that grew, keeping
// only names for which keep is true.
func counterDiff(before, after map[string]uint64, keep func(string) bool) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if v > before[k] && keep(k) {
			out[k] = v - before[k]
		}
	}
	return out
}

func isDropCounter(k string) bool {
	return strings.HasPrefix(k, "drop.") || strings.Contains(k, "dropped") || strings.Contains(k, "failed") || k == "link.down"
}

// procStatusMiB returns the named kB figures of /proc/<pid>/status
// (VmHWM, RssAnon, ...) in MiB.
func procStatusMiB(pid int, names ...string) ([]float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		i := slices.Index(names, name)
		f := strings.Fields(v)
		if i < 0 || len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, err
		}
		out[i] = float64(kb) / 1024
		found++
	}
	if found != len(names) {
		return nil, fmt.Errorf("/proc/%d/status lacks some of %v", pid, names)
	}
	return out, nil
}

// durationStats renders p50, p99 and max of ds.
func durationStats(ds []time.Duration) (p50, p99, mx time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, max(0, int(p*float64(len(s))+0.999999)-1))] }
	return at(0.50), at(0.99), s[len(s)-1]
}

// TestFaultPartitionHeal: five hosts on a bridge share #ch. The mesh is
// split 2|3 for 12 s while one node on each side publishes, then healed.
// The nodes keep their links alive every second and close a link silent
// for 4 s, so the split outlasts the links across it: every node closes
// one as silent (link.down.timeout), and the heal has to dial again.
// Every node must then hold the same set of ids, every id a publisher
// got back among them, within 10 s of the heal.
func TestFaultPartitionHeal(t *testing.T) {
	// Parallel: its load is light (ten messages a second for half a
	// minute, in its own network namespaces). The other fault tests load
	// the CPU and hold timing bounds, so they run alone.
	testpar.First(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	const (
		n         = 5
		split     = 12 * time.Second
		converge  = 10 * time.Second
		giveUp    = 60 * time.Second // to report how long it took when over
		pubPeriod = 100 * time.Millisecond
	)
	sideA, sideB := []int{0, 1}, []int{2, 3, 4}
	nw := netnstest.NewBridge(t, n)
	homes, keys, pinned := multiHostOrg(t, meshctl, n)
	m := &faultMesh{t: t, meshctl: meshctl, homes: homes, keys: keys}
	for i := range n {
		m.names = append(m.names, "host"+strconv.Itoa(i))
	}
	m.cmd = func(i int) *exec.Cmd {
		args := []string{"--home", homes[i], "--roster", pinned, "--listen", "tcp://0.0.0.0:7437", "--no-unix", "--no-mdns",
			"--presence-ttl", "3s", "--keepalive", "1s", "--idle-timeout", "4s"}
		for j := range n {
			if j != i {
				args = append(args, "--seed", "tcp://"+nw.Host(j).IP.String()+":7437")
			}
		}
		return nw.Host(i).Command(context.Background(), meshd, args...)
	}
	m.startAll(15 * time.Second)
	m.channel("ch")
	before := make([]map[string]uint64, n)
	for i := range n {
		before[i] = m.status(i).Counters
	}

	// One publisher per side, from before the split until the heal.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	published := []*faultIDs{newFaultIDs(), newFaultIDs()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for side, host := range []int{1, 3} {
		wg.Go(func() {
			c := m.client(host)
			tick := time.NewTicker(pubPeriod)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				at := time.Now()
				s, err := c.Send(ctx, api.Send{To: "#ch", Body: fmt.Sprintf("side %c message %d", 'A'+side, k)})
				if err != nil {
					t.Errorf("host%d: send: %v", host, err)
					return
				}
				published[side].add(s.ID, at)
			}
		})
	}
	// Both sides publish some messages before the split.
	testwait.For(t, 30*time.Second, "20 messages published on each side before the split", func() bool {
		return published[0].len() >= 20 && published[1].len() >= 20
	})
	for _, a := range sideA {
		for _, b := range sideB {
			if err := nw.Partition(a, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut := time.Now()
	t.Logf("split {0,1} | {2,3,4}")

	// The split holds: what side A says a second into it stays on side A.
	// Wait until host0, on side A, holds 20 of those messages: host3
	// would hold them by then too if the partition leaked.
	var fromA, onA map[string]bool
	if !testwait.Until(15*time.Second, func() bool {
		fromA = published[0].set(cut.Add(time.Second))
		var err error
		if onA, err = m.historyIDsAPI(0, "ch"); err != nil {
			t.Fatalf("host0: history: %v", err)
		}
		return len(fromA)-len(absent(fromA, onA)) >= 20
	}) {
		t.Fatalf("host0 holds %d of the %d messages side A sent a second into the split, want 20", len(fromA)-len(absent(fromA, onA)), len(fromA))
	}
	onB := m.historyIDs(3, "ch")
	if held := len(fromA) - len(absent(fromA, onB)); held != 0 {
		t.Fatalf("the partition leaks: host3 holds %d of the %d messages side A sent during it", held, len(fromA))
	}

	time.Sleep(time.Until(cut.Add(split))) // deliberate: the split lasts its time
	close(stop)
	wg.Wait()
	for _, a := range sideA {
		for _, b := range sideB {
			if err := nw.Heal(a, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	healed := time.Now()
	if t.Failed() {
		return
	}
	all := published[0].set(time.Time{})
	for id := range published[1].set(time.Time{}) {
		all[id] = true
	}
	t.Logf("healed after %v; side A published %d, side B %d", healed.Sub(cut).Round(time.Millisecond), published[0].len(), published[1].len())

	// Converged: all five hold the same ids, every published one among them.
	var took time.Duration
	var last []map[string]bool
	if !testwait.Until(time.Until(healed.Add(giveUp)), func() bool {
		last = last[:0]
		ok := true
		for i := range n {
			got, err := m.historyIDsAPI(i, "ch")
			if err != nil {
				t.Fatalf("host%d: history: %v", i, err)
			}
			last = append(last, got)
			ok = ok && len(absent(all, got)) == 0 && sameSet(got, last[0])
		}
		return ok
	}) {
		for i, got := range last {
			t.Logf("host%d holds %d ids, lacks %d published", i, len(got), len(absent(all, got)))
		}
		t.Fatalf("no convergence within %v of the heal", giveUp)
	}
	took = time.Since(healed)
	// The same, read with meshctl history --json on every node.
	ref := m.historyIDs(0, "ch")
	for i := 1; i < n; i++ {
		if got := m.historyIDs(i, "ch"); !sameSet(got, ref) {
			t.Fatalf("host%d: %d ids, host0 %d; %d differ", i, len(got), len(ref), len(absent(ref, got))+len(absent(got, ref)))
		}
	}
	for i := range n {
		s := m.status(i)
		t.Logf("host%d: %d links, counters changed: %v", i, s.Links, counterDiff(before[i], s.Counters, func(k string) bool {
			return isDropCounter(k) || strings.HasPrefix(k, "link.") || strings.HasPrefix(k, "sync.rounds") || strings.HasPrefix(k, "dial.")
		}))
		if s.Counters["link.down.timeout"] == before[i]["link.down.timeout"] {
			t.Errorf("host%d closed no link as silent (link.down.timeout): the split did not outlast the links across it", i)
		}
	}
	t.Logf("all %d nodes hold the same %d ids (%d published) %v after the heal", n, len(ref), len(all), took.Round(time.Millisecond))
	if took > converge {
		t.Errorf("converged %v after the heal, want within %v", took.Round(time.Millisecond), converge)
	}
}

// TestFaultCrashLoop kills a reader with SIGKILL ten times while another
// node publishes to a channel it reads and sends it DMs, restarting it
// each time. Nothing it acknowledged (an item on its event stream, which
// meshd emits after the commit is durable) is lost across a kill, every
// mailbox file verifies, and it rejoins and catches up.
func TestFaultCrashLoop(t *testing.T) {
	const kills = 10
	m := newLoopbackFaultMesh(t, []string{"alice", "bob", "carol"}, "--presence-ttl", "3s")
	const alice, bob = 0, 1
	m.channel("crash")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// alice: a channel message every 25 ms and a DM to bob every 100 ms.
	chanIDs, dmIDs := newFaultIDs(), newFaultIDs()
	stop := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		c := m.client(alice)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			at := time.Now()
			s, err := c.Send(ctx, api.Send{To: "#crash", Body: fmt.Sprintf("crash channel %d", k)})
			if err != nil {
				t.Errorf("alice: send: %v", err)
				return
			}
			chanIDs.add(s.ID, at)
			if k%4 == 0 {
				s, err := c.Send(ctx, api.Send{To: "bob", Body: fmt.Sprintf("crash dm %d", k)})
				if err != nil {
					t.Errorf("alice: dm: %v", err)
					return
				}
				dmIDs.add(s.ID, at)
			}
		}
	}()

	// stored returns bob's stored channel ids and inbox ids.
	stored := func() (map[string]bool, map[string]bool) {
		h, err := m.historyIDsAPI(bob, "crash")
		if err != nil {
			t.Fatalf("bob: history: %v", err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		in, err := m.client(bob).Inbox(cctx, api.InboxQuery{All: true, Limit: 1000})
		if err != nil {
			t.Fatalf("bob: inbox: %v", err)
		}
		if len(in.Items) == 1000 {
			t.Fatalf("bob's inbox holds 1000 items or more: the check below would miss older ones")
		}
		ib := map[string]bool{}
		for _, it := range in.Items {
			ib[it.ID] = true
		}
		return h, ib
	}

	acked := newFaultIDs()
	for k := range kills {
		sctx, scancel := context.WithCancel(ctx)
		es, err := m.client(bob).OpenEvents(sctx)
		if err != nil {
			t.Fatalf("kill %d: events: %v", k+1, err)
		}
		var mu sync.Mutex
		cycle := 0
		streamDone := make(chan struct{})
		go func() {
			defer close(streamDone)
			for {
				ev, err := es.Next()
				if err != nil {
					return // bob was killed
				}
				if ev.Lagged {
					t.Errorf("bob's event stream lagged: acknowledged items may go unchecked")
					continue
				}
				acked.add(ev.Item.ID, time.Now())
				mu.Lock()
				cycle++
				mu.Unlock()
			}
		}()
		var c int
		if !testwait.Until(10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			c = cycle
			return c >= 20
		}) {
			t.Fatalf("kill %d: bob acknowledged %d items in 10 s", k+1, c)
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // deliberate: the kill falls at a random point
		if err := m.ds[bob].stop(syscall.SIGKILL); err == nil {
			t.Fatal("meshd exited cleanly on SIGKILL?")
		}
		<-streamDone
		scancel()
		es.Close()
		before := acked.set(time.Time{})

		killed := time.Now()
		m.start(bob)
		t.Logf("kill %d: %d acknowledged so far; restarted in %v", k+1, len(before), time.Since(killed).Round(time.Millisecond))
		h, ib := stored()
		for id := range h {
			ib[id] = true
		}
		if miss := absent(before, ib); len(miss) > 0 {
			t.Fatalf("kill %d: %d of %d acknowledged items lost, e.g. %s", k+1, len(miss), len(before), miss[0])
		}
	}
	close(stop)
	<-pubDone
	if t.Failed() {
		return
	}

	// bob rejoins and catches up: its channel history equals alice's, and
	// every DM alice sent is in its inbox.
	waitPeers(t, m.meshctl, m.homes[bob], 2, 15*time.Second)
	wantChan, wantDM := chanIDs.set(time.Time{}), dmIDs.set(time.Time{})
	start := time.Now()
	var h, ah map[string]bool
	var missChan, missDM []string
	if !testwait.Until(30*time.Second, func() bool {
		var ib map[string]bool
		h, ib = stored()
		var err error
		if ah, err = m.historyIDsAPI(alice, "crash"); err != nil {
			t.Fatal(err)
		}
		missChan, missDM = absent(wantChan, h), absent(wantDM, ib)
		return len(missChan) == 0 && len(missDM) == 0 && sameSet(h, ah)
	}) {
		t.Fatalf("bob after 30 s: lacks %d of %d channel messages and %d of %d DMs; alice holds %d, bob %d",
			len(missChan), len(wantChan), len(missDM), len(wantDM), len(ah), len(h))
	}
	caught := time.Since(start)

	// Every mailbox file verifies, and every acknowledged item has one.
	all := acked.set(time.Time{})
	var files []string
	var lacking []string
	if !testwait.Until(10*time.Second, func() bool {
		files, _ = filepath.Glob(filepath.Join(m.homes[bob], "mailbox", "*", "inbox", "*.txt"))
		have := map[string]bool{}
		for _, f := range files {
			base := strings.TrimSuffix(filepath.Base(f), ".txt")
			if _, id12, ok := strings.Cut(base, "-"); ok && len(id12) >= 12 {
				have[id12[:12]] = true
			}
		}
		lacking = lacking[:0]
		for id := range all {
			if !have[id[len(id)-12:]] {
				lacking = append(lacking, id)
			}
		}
		return len(lacking) == 0
	}) {
		t.Fatalf("%d acknowledged items have no mailbox file, e.g. %s", len(lacking), lacking[0])
	}
	for i := 0; i < len(files); i += 200 {
		args := append([]string{"--home", m.homes[bob], "verify"}, files[i:min(i+200, len(files))]...)
		if r := meshctlRun(t, m.meshctl, args...); r.code != 0 || strings.Count(r.stdout, "ok ") != min(200, len(files)-i) {
			t.Fatalf("mailbox files do not verify: exit %d\n%s", r.code, r.stderr)
		}
	}
	// And every file is in its day's index: lines a kill kept out were
	// appended at the next start (mirror.reindexed).
	var unlisted []string
	testwait.Until(5*time.Second, func() bool {
		unlisted = unlisted[:0]
		indexes := map[string]string{}
		for _, f := range files {
			idx := filepath.Join(filepath.Dir(filepath.Dir(f)), "index.txt")
			if _, ok := indexes[idx]; !ok {
				b, _ := os.ReadFile(idx)
				indexes[idx] = string(b)
			}
			if !strings.Contains(indexes[idx], "\tinbox/"+filepath.Base(f)+"\t") {
				unlisted = append(unlisted, f)
			}
		}
		return len(unlisted) == 0
	})
	if len(unlisted) > 0 {
		t.Fatalf("%d of %d mailbox files are in no index, e.g. %s", len(unlisted), len(files), unlisted[0])
	}
	s := m.status(bob)
	t.Logf("%d kills: alice sent %d channel messages and %d DMs; bob acknowledged %d items before kills, caught up %v after the last restart; %d mailbox files verify and are indexed; bob's counters since its last start: %v",
		kills, len(wantChan), len(wantDM), len(all), caught.Round(time.Millisecond), len(files),
		counterDiff(nil, s.Counters, func(k string) bool {
			return isDropCounter(k) || strings.HasPrefix(k, "sync.") || strings.HasPrefix(k, "mirror.")
		}))
}

// TestFaultFlood: bob sends to #flood as fast as 32 goroutines can for
// 5 s (20 s with MESHD_BENCH=1, the figures in BENCHMARKS.md) while carol
// publishes 10 msg/s to #calm. Every meshd's peak RSS
// stays under 256 MiB, every #calm message reaches dave (latency measured
// on his event stream), and every message bob did not hand to a reader
// is counted in bob's tx.dropped.queue: nothing is dropped silently.
func TestFaultFlood(t *testing.T) {
	floodFor := window(5*time.Second, 20*time.Second)
	const (
		flooders   = 32
		calmPeriod = 100 * time.Millisecond
		rssLimit   = 256.0 // MiB
	)
	names := []string{"alice", "bob", "carol", "dave"}
	m := newLoopbackFaultMesh(t, names, append([]string{"--presence-ttl", "3s"}, noChannelQuota...)...)
	const bob, carol, dave = 1, 2, 3
	m.channel("flood")
	m.channel("calm")
	fps := make([]string, len(names))
	before := make([]map[string]uint64, len(names))
	for i := range names {
		s := m.status(i)
		fps[i], before[i] = s.Fingerprint, s.Counters
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// dave's event stream: the delivery time of every #calm message.
	type calmSeen struct {
		delivered time.Time
		lat       time.Duration
	}
	var evMu sync.Mutex
	calmEvents := map[string]calmSeen{} // guarded by evMu, by id
	lagged, floodEvents := 0, 0         // guarded by evMu
	const endMark = "end of the #calm check"
	endSeen := make(chan struct{}) // closed when dave's stream carries endMark
	es, err := m.client(dave).OpenEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for {
			ev, err := es.Next()
			if err != nil {
				return
			}
			evMu.Lock()
			switch {
			case ev.Lagged:
				lagged++
			case ev.Item.Channel == "flood":
				floodEvents++
			case ev.Item.Body == endMark:
				close(endSeen)
			case ev.Item.Channel == "calm":
				if f := strings.Fields(ev.Item.Body); len(f) == 3 {
					if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
						calmEvents[ev.Item.ID] = calmSeen{ev.Item.Delivered, ev.Item.Delivered.Sub(time.Unix(0, ns))}
					}
				}
			}
			evMu.Unlock()
		}
	}()

	// The flood, and the paced publisher beside it.
	var sendMu sync.Mutex
	floodSent, floodErrs := 0, 0
	handed := make([]int, len(names)) // guarded by sendMu: flood messages bob handed to each node
	var firstErr error
	calmIDs := newFaultIDs()
	calmHanded := make([]int, len(names))
	start := time.Now()
	end := start.Add(floodFor)
	var wg sync.WaitGroup
	pad := strings.Repeat("f", 1000)
	for w := range flooders {
		wg.Go(func() {
			c := m.client(bob)
			for k := 0; time.Now().Before(end); k++ {
				s, err := c.Send(ctx, api.Send{To: "#flood", Body: fmt.Sprintf("flood %d-%d %s", w, k, pad)})
				sendMu.Lock()
				if err != nil {
					floodErrs++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					floodSent++
					for i, fp := range fps {
						if slices.Contains(s.SentTo, fp) {
							handed[i]++
						}
					}
				}
				sendMu.Unlock()
			}
		})
	}
	wg.Go(func() {
		c := m.client(carol)
		tick := time.NewTicker(calmPeriod)
		defer tick.Stop()
		for k := 0; time.Now().Before(end); k++ {
			<-tick.C
			at := time.Now()
			s, err := c.Send(ctx, api.Send{To: "#calm", Body: fmt.Sprintf("calm %d %d", k, at.UnixNano())})
			if err != nil {
				t.Errorf("carol: send: %v", err)
				return
			}
			calmIDs.add(s.ID, at)
			sendMu.Lock()
			for i, fp := range fps {
				if slices.Contains(s.SentTo, fp) {
					calmHanded[i]++
				}
			}
			sendMu.Unlock()
		}
	})
	wg.Wait()
	floodEnd := time.Now()
	sendMu.Lock()
	t.Logf("bob sent %d flood messages in %v (%.0f/s), %d send errors (first: %v); handed to alice %d, carol %d, dave %d",
		floodSent, floodEnd.Sub(start).Round(time.Millisecond), float64(floodSent)/floodEnd.Sub(start).Seconds(), floodErrs, firstErr,
		handed[0], handed[carol], handed[dave])
	sendMu.Unlock()

	// Drain: every reader has what it was handed, and dave has #calm.
	calm := calmIDs.set(time.Time{})
	readers := []int{0, carol, dave}
	var after []map[string]uint64
	var onDave map[string]bool
	if !testwait.Until(30*time.Second, func() bool {
		after = make([]map[string]uint64, len(names))
		done := true
		for _, i := range append([]int{bob}, readers...) {
			after[i] = m.status(i).Counters
		}
		for _, i := range readers {
			want := handed[i]
			if i != carol {
				want += calmHanded[i]
			}
			if got := int(after[i]["rx.delivered.message"] - before[i]["rx.delivered.message"]); got < want {
				done = false
			}
		}
		var err error
		if onDave, err = m.historyIDsAPI(dave, "calm"); err != nil {
			t.Fatal(err)
		}
		return done && len(absent(calm, onDave)) == 0
	}) {
		for _, i := range readers {
			t.Logf("%s: delivered %d, handed %d flood + %d calm", names[i], after[i]["rx.delivered.message"]-before[i]["rx.delivered.message"], handed[i], calmHanded[i])
		}
		t.Fatalf("readers did not get what they were handed within 30 s of the flood's end; dave lacks %d of %d #calm", len(absent(calm, onDave)), len(calm))
	}
	drained := time.Since(floodEnd)

	// Memory stayed bounded. The resident set includes the history store,
	// which is mapped whole (RssFile); RssAnon is the heap and stacks.
	var rss []string
	for i, d := range m.ds {
		v, err := procStatusMiB(d.cmd.Process.Pid, "VmHWM", "RssAnon", "RssFile")
		if err != nil {
			t.Fatal(err)
		}
		rss = append(rss, fmt.Sprintf("%s %.1f MiB (now anon %.1f + file %.1f)", names[i], v[0], v[1], v[2]))
		if v[0] > rssLimit {
			t.Errorf("%s: peak RSS %.1f MiB, over %.0f MiB", names[i], v[0], rssLimit)
		}
	}
	t.Logf("peak RSS (VmHWM): %s", strings.Join(rss, ", "))

	// #calm kept flowing: latency on dave's event stream, or from his store
	// for what the stream skipped. dave holds every #calm message, so a DM
	// carol sends now comes on his stream after all their events.
	if _, err := m.client(carol).Send(ctx, api.Send{To: names[dave], Body: endMark}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-endSeen:
	case <-time.After(30 * time.Second):
		t.Fatal("carol's last DM did not come on dave's event stream within 30 s")
	}
	es.Close()
	<-evDone
	var lats []time.Duration
	inFlood := 0
	evMu.Lock()
	fromStream := len(calmEvents)
	for _, c := range calmEvents {
		lats = append(lats, c.lat)
		if c.delivered.Before(floodEnd) {
			inFlood++
		}
	}
	daveLagged, daveFloodEvents := lagged, floodEvents
	evMu.Unlock()
	if fromStream < len(calm) {
		h, err := m.client(dave).History(ctx, api.HistoryQuery{Channel: "calm", Limit: api.MaxHistoryLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range h.Messages {
			if _, ok := calmEvents[x.ID]; ok {
				continue
			}
			if f := strings.Fields(x.Body); len(f) == 3 {
				if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
					lats = append(lats, x.Received.Sub(time.Unix(0, ns)))
					if x.Received.Before(floodEnd) {
						inFlood++
					}
				}
			}
		}
	}
	p50, p99, mx := durationStats(lats)
	t.Logf("#calm at dave: %d of %d paced messages, %d during the flood; publish→inbox p50 %v p99 %v max %v (%d from the event stream, which lagged %d× and carried %d flood items)",
		len(lats), len(calm), inFlood, p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond),
		fromStream, daveLagged, daveFloodEvents)
	if len(lats) != len(calm) {
		t.Errorf("dave has %d of %d #calm messages", len(lats), len(calm))
	}
	if inFlood < len(calm)*9/10 {
		t.Errorf("only %d of %d #calm messages reached dave during the flood: the flood starves other channels", inFlood, len(calm))
	}

	// Drops are counted: what bob did not hand to a reader shows in his
	// tx.dropped.queue, and no reader lost what it was handed.
	notHanded := 0
	for _, i := range readers {
		notHanded += floodSent - handed[i]
	}
	txDropped := int(after[bob]["tx.dropped.queue"] - before[bob]["tx.dropped.queue"])
	for i := range names {
		t.Logf("%s: counters changed: %v", names[i], counterDiff(before[i], after[i], func(k string) bool {
			return isDropCounter(k) || strings.HasPrefix(k, "rx.delivered") || k == "tx.envelopes" || k == "rx.commits" || strings.HasPrefix(k, "sync.")
		}))
	}
	if txDropped < notHanded {
		t.Errorf("bob did not hand %d flood messages to readers but counted %d in tx.dropped.queue: silent drops", notHanded, txDropped)
	}
	if notHanded == 0 {
		t.Logf("nothing overflowed: bob handed every flood message to every reader; drained %v after the flood", drained.Round(time.Millisecond))
	} else {
		t.Logf("the flood overflowed bob's link queues: %d (message, reader) pairs not handed, tx.dropped.queue +%d; drained %v after the flood",
			notHanded, txDropped, drained.Round(time.Millisecond))
	}
}

// TestBenchTenNodes runs meshctl bench against ten real meshd processes on
// loopback, for the figures in docs/BENCHMARKS.md. It runs only with
// MESHD_BENCH=1; with MESHD_BENCH_OUT=DIR it also writes each run's JSON
// there.
//
//	MESHD_BENCH=1 go test -run '^TestBenchTenNodes$' -v -timeout 10m ./cmd/meshd
func TestBenchTenNodes(t *testing.T) {
	if os.Getenv("MESHD_BENCH") != "1" {
		t.Skip("a benchmark of ten real nodes; set MESHD_BENCH=1 to run it")
	}
	names := make([]string, 10)
	for i := range names {
		names[i] = "node" + strconv.Itoa(i)
	}
	m := newLoopbackFaultMesh(t, names, noChannelQuota...)
	m.channel("bench")
	readers := strings.Join(m.homes[1:], ",")
	runs := []struct{ name, rate string }{
		{"rate-100", "100"},
		{"rate-1000", "1000"},
		{"saturation", "0"},
	}
	if only := os.Getenv("MESHD_BENCH_RUNS"); only != "" {
		runs = slices.DeleteFunc(runs, func(r struct{ name, rate string }) bool { return !strings.Contains(only, r.name) })
	}
	for _, r := range runs {
		args := []string{"bench", "--publisher", m.homes[0], "--readers", readers, "--channel", "bench",
			"--rate", r.rate, "--duration", "10s", "--json"}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, m.meshctl, args...)
		cmd.Env = cleanEnv()
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("meshctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if dir := os.Getenv("MESHD_BENCH_OUT"); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, r.name+".json"), out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var res struct {
			Sent                int     `json:"sent"`
			OfferedPerSecond    float64 `json:"offered_per_second"`
			Expected            int     `json:"expected"`
			Delivered           int     `json:"delivered"`
			Missing             int     `json:"missing"`
			DeliveriesPerSecond float64 `json:"deliveries_per_second"`
			Latency             struct {
				Count int     `json:"count"`
				P50   float64 `json:"p50_ms"`
				P99   float64 `json:"p99_ms"`
				Max   float64 `json:"max_ms"`
			} `json:"latency"`
			Untimed          int     `json:"untimed"`
			CPUPerDeliveryUS float64 `json:"cpu_us_per_delivery"`
			Nodes            []struct {
				Name       string            `json:"name"`
				PeakRSSMiB float64           `json:"peak_rss_mib"`
				CPUSeconds float64           `json:"cpu_seconds"`
				Drops      map[string]uint64 `json:"drops"`
				Delivered  uint64            `json:"rx_delivered_message"`
				Commits    uint64            `json:"rx_commits"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var nodes []string
		for _, n := range res.Nodes {
			batch := ""
			if n.Commits > 0 {
				batch = fmt.Sprintf(" %.1f per commit", float64(n.Delivered)/float64(n.Commits))
			}
			nodes = append(nodes, fmt.Sprintf("%s %.1f MiB %.2f s%s %v", n.Name, n.PeakRSSMiB, n.CPUSeconds, batch, n.Drops))
		}
		t.Logf("%s: $ meshctl %s\n  offered %d (%.1f/s), delivered %d of %d (%d missing), %.0f deliveries/s\n  publish→mailbox file p50 %.2f ms p99 %.2f ms max %.2f ms (%d timed, %d untimed)\n  CPU %.0f µs per delivery\n  %s",
			r.name, strings.Join(args, " "), res.Sent, res.OfferedPerSecond, res.Delivered, res.Expected, res.Missing, res.DeliveriesPerSecond,
			res.Latency.P50, res.Latency.P99, res.Latency.Max, res.Latency.Count, res.Untimed,
			res.CPUPerDeliveryUS, strings.Join(nodes, "\n  "))
	}
}
