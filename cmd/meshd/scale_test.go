//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// TestScaleMesh measures a full mesh of N real meshd processes, for the
// scale figures in docs/BENCHMARKS.md. Each node runs on a host of its own
// (a network namespace on one bridge, as on a LAN) when namespaces can be
// made here, else all on loopback (MESHD_SCALE_NET=loopback forces that,
// and MESHD_SCALE_NET=loopback-tcp too, without Unix link sockets;
// there, all nodes dial from 127.0.0.1 and the listeners' 8 handshakes
// per source shed some of their dials). It runs only with
// MESHD_SCALE set to the sizes to measure, one mesh after the other:
//
//	MESHD_SCALE=30,60,120,200 go test -run '^TestScaleMesh$' -v -timeout 60m ./cmd/meshd
//
// For each N it reports: the time from the last start to a full mesh (or
// the links per node when none forms within MESHD_SCALE_FORM, default
// 180s); over MESHD_SCALE_IDLE (default 40s) once the mesh settles, the
// mean and largest RSS per node, the CPU of all nodes together, and the
// bytes each node writes and reads per second (/proc/PID/io: at idle,
// almost all of it is link traffic: keepalives, presence and peer
// exchange); then the time one channel message takes to reach every
// reader's mailbox file. The nodes' own counters split the idle traffic
// they receive by kind: keepalives (19-byte records: ping and pong),
// presence, peer exchange and the rest. With MESHD_SCALE_OUT=DIR each N's
// figures are also written there as JSON; a size is skipped unless
// MemAvailable holds MESHD_SCALE_MIB (default 100) MiB per node; with
// MESHD_SCALE_BIN=DIR the
// meshd and meshctl binaries in DIR are measured instead of ones built
// from this tree (to compare an older version with the same harness).
func TestScaleMesh(t *testing.T) {
	spec := os.Getenv("MESHD_SCALE")
	if spec == "" {
		t.Skip("a measurement of N real nodes; set MESHD_SCALE=30,60 (sizes) to run it")
	}
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			t.Fatalf("MESHD_SCALE: %q is not a size of at least 2", s)
		}
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) { runScale(t, n) })
	}
}

// scaleResult is one mesh's figures.
type scaleResult struct {
	Nodes           int       `json:"nodes"`
	FullMeshSeconds float64   `json:"full_mesh_seconds"` // -1: none within the limit
	MeanLinks       float64   `json:"mean_links"`        // at full mesh or at the limit
	MinLinks        int       `json:"min_links"`
	IdleSeconds     float64   `json:"idle_seconds"`
	RSSMeanMiB      float64   `json:"rss_mean_mib"`
	RSSMaxMiB       float64   `json:"rss_max_mib"`
	IdleCPUPercent  float64   `json:"idle_cpu_percent_of_one_core"`     // all nodes together
	WakeupsPerS     float64   `json:"idle_wakeups_per_second_per_node"` // context switches, all threads
	WriteBytesPerS  float64   `json:"write_bytes_per_second_per_node"`
	ReadBytesPerS   float64   `json:"read_bytes_per_second_per_node"`
	FanoutSeconds   []float64 `json:"fanout_seconds"` // per message: send to the last reader's file; -1 if not all within 10 s
	FanoutReached   []int     `json:"fanout_reached"` // per message: readers with the file within 10 s

	// Formation: CPU of all nodes from the first start to the full mesh
	// (or the limit), the links admitted (both ends, duplicates included)
	// and that CPU per admitted link end, an upper bound on the
	// handshake's cost since it includes everything else done meanwhile.
	FormationCPUSeconds float64 `json:"formation_cpu_seconds"`
	LinksUp             uint64  `json:"links_up"`
	DuplicateLinks      uint64  `json:"duplicate_links"`
	DialAttempts        uint64  `json:"dial_attempts"`
	CPUPerLinkMillis    float64 `json:"formation_cpu_ms_per_link_end"`

	// Idle control traffic received per node per second, by kind, from
	// the nodes' counters (frame bytes, without record framing,
	// encryption or TCP overhead, except keepalives: whole records).
	KeepaliveBytesPerS float64 `json:"keepalive_bytes_per_second_per_node"`
	PresenceBytesPerS  float64 `json:"presence_bytes_per_second_per_node"`
	PeersBytesPerS     float64 `json:"peers_bytes_per_second_per_node"`
	OtherBytesPerS     float64 `json:"other_frame_bytes_per_second_per_node"`
	// The same traffic in units per node per second: pings (in and out;
	// each has its pong), presence envelopes and peer-update frames
	// received, and the wake-ups of the links' keepalive timers.
	KeepalivesPerS     float64 `json:"pings_per_second_per_node"`
	KeepaliveWakesPerS float64 `json:"keepalive_wakeups_per_second_per_node"`
	PresencePerS       float64 `json:"presence_per_second_per_node"`
	PeerUpdatesPerS    float64 `json:"peer_updates_per_second_per_node"`

	// ScanOnly counts nodes whose outbox could not be watched (inotify
	// instances used up) and scans instead; ScanWarned those that logged
	// the warning saying so.
	ScanOnly   int `json:"outbox_scan_only_nodes"`
	ScanWarned int `json:"outbox_scan_warned_nodes"`

	// FormationCounters sums, over all nodes, the link, dial, peer
	// exchange, handshake and address counters once formation ended.
	FormationCounters map[string]uint64 `json:"formation_counters"`
	// IdleCounters is what those counters grew by from just before the
	// idle window to its end (link moves or redials left from formation
	// would show here, and cost the window CPU).
	IdleCounters map[string]uint64 `json:"idle_counters"`
}

// prefixTotals sums, over every node, the counters whose names start
// with one of prefixes.
func prefixTotals(clients []*api.Client, prefixes ...string) map[string]uint64 {
	var mu sync.Mutex
	out := map[string]uint64{}
	parallel(len(clients), 16, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := clients[i].Status(ctx)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range st.Counters {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					out[k] += v
					break
				}
			}
		}
	})
	return out
}

// keepaliveRecord is the size of a ping or pong on the wire: length
// prefix, header byte and tag.
const keepaliveRecord = 2 + 1 + 16

// counterTotals sums the named counters of every node.
func counterTotals(clients []*api.Client, names ...string) []map[string]uint64 {
	out := make([]map[string]uint64, len(clients))
	parallel(len(clients), 16, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out[i] = map[string]uint64{}
		if st, err := clients[i].Status(ctx); err == nil {
			for _, n := range names {
				out[i][n] = st.Counters[n]
			}
		}
	})
	return out
}

func sumCounter(cs []map[string]uint64, name string) uint64 {
	var s uint64
	for _, c := range cs {
		s += c[name]
	}
	return s
}

func runScale(t *testing.T, n int) {
	perNode := 100.0 // MiB: the figure before the buffers were pooled, with room
	if v := os.Getenv("MESHD_SCALE_MIB"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			perNode = f
		}
	}
	if avail := memAvailableMiB(t); avail < float64(n)*perNode {
		t.Skipf("%.0f MiB available; %d nodes want about %.0f MiB (MESHD_SCALE_MIB=%.0f per node)", avail, n, float64(n)*perNode, perNode)
	}
	formLimit := envDuration(t, "MESHD_SCALE_FORM", 180*time.Second)
	idle := envDuration(t, "MESHD_SCALE_IDLE", 40*time.Second)
	var meshd, meshctl string
	if dir := os.Getenv("MESHD_SCALE_BIN"); dir != "" {
		meshd, meshctl = filepath.Join(dir, "meshd"), filepath.Join(dir, "meshctl")
	} else {
		meshd, meshctl = buildBinaries(t)
	}
	tmp := meshTempDir(t)
	homes := make([]string, n)
	keys := make([]string, n)
	parallel(n, 8, func(i int) {
		homes[i] = filepath.Join(tmp, fmt.Sprintf("n%03d", i))
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", homes[i], "init", "--name", fmt.Sprintf("n%03d", i))
		keys[i] = id.Key
	})
	meshctlOK(t, meshctl, "--home", homes[0], "roster", "init", "--org", "scale")
	for i := 1; i < n; i++ {
		meshctlOK(t, meshctl, "--home", homes[0], "roster", "add", keys[i], "--role", "member", "--name", fmt.Sprintf("n%03d", i))
	}
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(homes[0], "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// Start every node, all seeded to n000; peer exchange does the rest.
	ds := make([]*daemon, n)
	start := func(i int, args ...string) *daemon {
		args = append([]string{"--home", homes[i], "--no-mdns", "--log-level", "warn"}, args...)
		return startDaemonCmd(t, exec.Command(meshd, args...), homes[i])
	}
	listen := func(int) string { return "tcp://127.0.0.1:0" }
	seed := "unix://" + filepath.Join(homes[0], "link.sock")
	ok, why := netnstest.Available()
	switch os.Getenv("MESHD_SCALE_NET") {
	case "loopback":
		ok, why = false, "MESHD_SCALE_NET=loopback"
	case "loopback-tcp":
		// No link sockets: every link stays on TCP, as between hosts,
		// with no move to a Unix socket (PROTOCOL.md §14.12).
		ok, why = false, "MESHD_SCALE_NET=loopback-tcp, no Unix sockets"
		port := freeTCPPort(t)
		listen = func(i int) string {
			if i == 0 {
				return fmt.Sprintf("tcp://127.0.0.1:%d", port)
			}
			return "tcp://127.0.0.1:0"
		}
		seed = listen(0)
		plain := start
		start = func(i int, args ...string) *daemon { return plain(i, append(args, "--no-unix")...) }
	}
	if ok {
		raiseNeighbourTable(t, n)
		nw := netnstest.NewBridge(t, n)
		start = func(i int, args ...string) *daemon {
			args = append([]string{"--home", homes[i], "--no-mdns", "--log-level", "warn"}, args...)
			return startDaemonCmd(t, nw.Host(i).Command(context.Background(), meshd, args...), homes[i])
		}
		listen = func(i int) string { return "tcp://" + nw.Host(i).IP.String() + ":7437" }
		seed = listen(0)
		t.Logf("N=%d: one network namespace per node, on one bridge", n)
	} else {
		t.Logf("N=%d: all nodes on loopback (%s)", n, why)
	}
	ds[0] = start(0, "--listen", listen(0))
	waitStatus(t, meshctl, homes[0], ds[0])
	for i := 1; i < n; i++ {
		ds[i] = start(i, "--listen", listen(i), "--roster", pinned, "--seed", seed)
	}
	started := time.Now()
	clients := make([]*api.Client, n)
	for i := range clients {
		clients[i] = api.NewClient(filepath.Join(homes[i], "meshd.sock"))
	}

	res := scaleResult{Nodes: n, FullMeshSeconds: -1}
	links := make([]int, n)
	poll := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if p, err := clients[i].Peers(ctx); err == nil {
			links[i] = len(p.Peers)
		}
	}
	// Poll only the nodes short of a full mesh (each poll costs the node
	// a list of its peers); once none is, poll them all to confirm.
	short := func() bool { return slices.ContainsFunc(links, func(l int) bool { return l < n-1 }) }
	if testwait.Until(formLimit-time.Since(started), func() bool {
		parallel(n, 16, func(i int) {
			if links[i] < n-1 {
				poll(i)
			}
		})
		if short() {
			return false
		}
		parallel(n, 16, poll)
		return !short()
	}) {
		res.FullMeshSeconds = time.Since(started).Seconds()
	}
	sum := 0
	for _, l := range links {
		sum += l
	}
	var formCPU float64
	for i := range n {
		formCPU += sampleProc(t, ds[i].cmd.Process.Pid).cpuSeconds
	}
	res.FormationCPUSeconds = formCPU
	fc := counterTotals(clients, "link.up", "link.duplicate", "dial.attempt")
	res.LinksUp, res.DuplicateLinks, res.DialAttempts = sumCounter(fc, "link.up"), sumCounter(fc, "link.duplicate"), sumCounter(fc, "dial.attempt")
	if res.LinksUp > 0 {
		res.CPUPerLinkMillis = 1000 * formCPU / float64(res.LinksUp+res.DuplicateLinks)
	}
	t.Logf("N=%d formation: CPU of all nodes %.1f s; %d link ends up, %d duplicates closed, %d dials; %.1f ms CPU per link end",
		n, formCPU, res.LinksUp, res.DuplicateLinks, res.DialAttempts, res.CPUPerLinkMillis)
	res.FormationCounters = prefixTotals(clients, "link.", "dial.", "peers.", "handshake.", "addr.")
	t.Logf("N=%d formation counters, all nodes: %v", n, res.FormationCounters)
	res.MeanLinks = float64(sum) / float64(n)
	res.MinLinks = slices.Min(links)
	t.Logf("N=%d: full mesh after %.1f s (-1: none within %v); links per node mean %.1f, min %d",
		n, res.FullMeshSeconds, formLimit, res.MeanLinks, res.MinLinks)

	// Idle: let the formation's work finish, then measure.
	time.Sleep(10 * time.Second) // deliberate: the formation's tail (gossip, presence) settles before the idle window
	before := make([]procSample, n)
	after := make([]procSample, n)
	traffic := []string{"link.pings_in", "link.pings_out", "rx.presence_bytes", "rx.frame_bytes.peers", "rx.frame_bytes.peer-update", "rx.frame_bytes.envelope",
		"rx.frame_bytes.roster", "rx.frame_bytes.policy", "rx.frame_bytes.policy-digest", "rx.frame_bytes.ack", "rx.frame_bytes.goodbye", "rx.frame_bytes.unknown",
		"rx.presence", "peers.updates", "link.keepalive_wakeups"}
	idleBefore := prefixTotals(clients, "link.", "dial.", "peers.", "handshake.", "addr.")
	cb := counterTotals(clients, traffic...)
	parallel(n, 16, func(i int) { before[i] = sampleProc(t, ds[i].cmd.Process.Pid) })
	t0 := time.Now()
	time.Sleep(idle) // deliberate: the idle measurement window
	parallel(n, 16, func(i int) { after[i] = sampleProc(t, ds[i].cmd.Process.Pid) })
	res.IdleSeconds = time.Since(t0).Seconds()
	ca := counterTotals(clients, traffic...)
	res.IdleCounters = map[string]uint64{}
	for k, v := range prefixTotals(clients, "link.", "dial.", "peers.", "handshake.", "addr.") {
		if d := v - idleBefore[k]; v > idleBefore[k] && !strings.HasPrefix(k, "link.pings") && k != "link.keepalive_wakeups" {
			res.IdleCounters[k] = d
		}
	}
	t.Logf("N=%d counters that grew over the idle window, all nodes: %v", n, res.IdleCounters)
	per := func(names ...string) float64 {
		var d float64
		for _, name := range names {
			d += float64(sumCounter(ca, name)) - float64(sumCounter(cb, name))
		}
		return d / res.IdleSeconds / float64(n)
	}
	res.KeepaliveBytesPerS = keepaliveRecord * per("link.pings_in", "link.pings_out")
	res.PresenceBytesPerS = per("rx.presence_bytes")
	res.PeersBytesPerS = per("rx.frame_bytes.peers", "rx.frame_bytes.peer-update")
	// Presence rides in envelope frames; the two counters are read at
	// slightly different moments, so the difference may dip below zero.
	res.OtherBytesPerS = max(0, per(traffic[5:12]...)-res.PresenceBytesPerS)
	res.KeepalivesPerS, res.PresencePerS, res.PeerUpdatesPerS = per("link.pings_in", "link.pings_out"), per("rx.presence"), per("peers.updates")
	t.Logf("N=%d idle control traffic received per node: keepalive %.0f B/s, presence %.0f B/s, peer exchange %.0f B/s, other frames %.0f B/s",
		n, res.KeepaliveBytesPerS, res.PresenceBytesPerS, res.PeersBytesPerS, res.OtherBytesPerS)
	res.KeepaliveWakesPerS = per("link.keepalive_wakeups")
	t.Logf("N=%d idle units per node: %.1f pings/s (in and out), %.1f keepalive timer wake-ups/s, %.2f presence envelopes/s, %.2f peer-updates/s",
		n, res.KeepalivesPerS, res.KeepaliveWakesPerS, res.PresencePerS, res.PeerUpdatesPerS)
	so := counterTotals(clients, "outbox.scan_only")
	for i := range n {
		if so[i]["outbox.scan_only"] > 0 {
			res.ScanOnly++
		}
		if strings.Contains(ds[i].stderr.String(), "cannot watch for new files; scanning instead") {
			res.ScanWarned++
		}
	}
	t.Logf("N=%d outboxes scanning instead of watching: %d (warned: %d)", n, res.ScanOnly, res.ScanWarned)
	if res.ScanOnly != res.ScanWarned {
		t.Errorf("%d outboxes scan instead of watching, but %d said so", res.ScanOnly, res.ScanWarned)
	}
	var cpu, wr, rd, rss, wake float64
	for i := range n {
		cpu += after[i].cpuSeconds - before[i].cpuSeconds
		wake += float64(after[i].switches - before[i].switches)
		wr += float64(after[i].wchar - before[i].wchar)
		rd += float64(after[i].rchar - before[i].rchar)
		rss += after[i].rssMiB
		res.RSSMaxMiB = max(res.RSSMaxMiB, after[i].rssMiB)
	}
	res.RSSMeanMiB = rss / float64(n)
	res.IdleCPUPercent = 100 * cpu / res.IdleSeconds
	res.WakeupsPerS = wake / res.IdleSeconds / float64(n)
	res.WriteBytesPerS = wr / res.IdleSeconds / float64(n)
	res.ReadBytesPerS = rd / res.IdleSeconds / float64(n)
	t.Logf("N=%d idle over %.0f s: RSS mean %.1f MiB max %.1f MiB; CPU of all nodes %.0f%% of a core (%.2f ms/s per node); per node %.0f wake-ups/s, %.0f B/s written, %.0f B/s read",
		n, res.IdleSeconds, res.RSSMeanMiB, res.RSSMaxMiB, res.IdleCPUPercent, 10*res.IdleCPUPercent/float64(n), res.WakeupsPerS, res.WriteBytesPerS, res.ReadBytesPerS)

	// Fan-out: one channel every node reads, then five messages from n000,
	// each timed to the last reader's mailbox file.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	meshctlOK(t, meshctl, "--home", homes[0], "channel", "create", "scale")
	parallel(n, 8, func(i int) {
		var err error
		if !testwait.Until(60*time.Second, func() bool {
			err = clients[i].Do(ctx, "POST", "/v1/subscriptions", "application/json", []byte(`{"channel":"scale","state":"subscribed"}`), nil)
			return err == nil
		}) {
			t.Errorf("n%03d: subscribe: %v", i, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	for k := range 5 {
		body, _ := json.Marshal(api.Send{To: "#scale", Body: fmt.Sprintf("scale message %d", k)})
		var sent api.Sent
		start := time.Now()
		if err := clients[0].Do(ctx, "POST", "/v1/send", "application/json", body, &sent); err != nil {
			t.Fatalf("send: %v", err)
		}
		id12 := sent.ID[len(sent.ID)-12:]
		var mu sync.Mutex
		last, reached := time.Duration(0), 0
		parallel(n-1, 32, func(j int) {
			if at, ok := waitMailboxFile(homes[j+1], id12, start, 10*time.Second); ok {
				mu.Lock()
				last, reached = max(last, at), reached+1
				mu.Unlock()
			}
		})
		res.FanoutReached = append(res.FanoutReached, reached)
		if reached == n-1 {
			res.FanoutSeconds = append(res.FanoutSeconds, last.Seconds())
		} else {
			res.FanoutSeconds = append(res.FanoutSeconds, -1)
		}
		time.Sleep(time.Second) // deliberate: each fan-out is timed alone, after the last one's acks
	}
	t.Logf("N=%d fan-out of one channel message to %d readers: time to the last reader's file %v s; readers reached within 10 s %v",
		n, n-1, res.FanoutSeconds, res.FanoutReached)

	if dir := os.Getenv("MESHD_SCALE_OUT"); dir != "" {
		out, _ := json.MarshalIndent(res, "", "  ")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Error(err)
		} else if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("scale-%d.json", n)), out, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// freeTCPPort returns a port on 127.0.0.1 that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// parallel runs f(0..n-1), at most width at a time, and waits.
func parallel(n, width int, f func(i int)) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// waitMailboxFile waits up to limit for home's mailbox file of the
// envelope whose id ends in id12, and returns when it appeared (its
// modification time) after start.
func waitMailboxFile(home, id12 string, start time.Time, limit time.Duration) (time.Duration, bool) {
	pattern := filepath.Join(home, "mailbox", "*", "inbox", "*-"+id12+"*.txt")
	var at time.Duration
	ok := testwait.Until(time.Until(start.Add(limit)), func() bool {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			if fi, err := os.Stat(m[0]); err == nil {
				at = fi.ModTime().Sub(start)
				return true
			}
		}
		return false
	})
	return at, ok
}

// procSample is what /proc says of a process at one moment.
type procSample struct {
	cpuSeconds   float64 // utime + stime
	rssMiB       float64
	wchar, rchar uint64
	switches     uint64 // context switches of all threads: wake-ups, mostly
}

func sampleProc(t *testing.T, pid int) procSample {
	var s procSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command name, which is in parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		s.cpuSeconds = float64(ut+st) / 100 // USER_HZ
	} else {
		t.Errorf("pid %d: %v", pid, err)
	}
	s.rssMiB = procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") / 1024
	s.wchar = uint64(procField(fmt.Sprintf("/proc/%d/io", pid), "wchar:"))
	s.rchar = uint64(procField(fmt.Sprintf("/proc/%d/io", pid), "rchar:"))
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, st := range tasks {
		s.switches += uint64(procField(st, "voluntary_ctxt_switches:") + procField(st, "nonvoluntary_ctxt_switches:"))
	}
	return s
}

// procField returns the number after name in a /proc file of "name value"
// lines, or 0.
func procField(path, name string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v
		}
	}
	return 0
}

func memAvailableMiB(t *testing.T) float64 {
	kib := procField("/proc/meminfo", "MemAvailable:")
	if kib == 0 {
		t.Skip("no MemAvailable in /proc/meminfo")
	}
	return kib / 1024
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration like 90s", name, v)
	}
	return d
}

// raiseNeighbourTable makes room in the kernel's ARP table for a full
// mesh of n hosts: n×(n-1) entries, in a table all namespaces share and
// that holds 1,024 by default (net.ipv4.neigh.default.gc_thresh3). Past
// it, new neighbours go unresolved ("neighbor table overflow") and dials
// time out. The old limits come back when the test ends.
func raiseNeighbourTable(t *testing.T, n int) {
	want := 2 * n * n
	for i, name := range []string{"gc_thresh1", "gc_thresh2", "gc_thresh3"} {
		p := "/proc/sys/net/ipv4/neigh/default/" + name
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("neighbour table: %v", err)
		}
		old := strings.TrimSpace(string(b))
		v, _ := strconv.Atoi(old)
		if target := want >> (2 - i); v < target {
			if err := os.WriteFile(p, []byte(strconv.Itoa(target)), 0o644); err != nil {
				t.Fatalf("neighbour table: %v", err)
			}
			t.Cleanup(func() { _ = os.WriteFile(p, []byte(old), 0o644) })
		}
	}
}
