package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// histOrg is a set of real meshd processes on loopback: the first node is
// the roster admin, the others members. Every node seeds the first one
// through its link socket, whose path survives restarts, so a restarted
// node finds the mesh again.
type histOrg struct {
	t       *testing.T
	meshd   string
	meshctl string
	names   []string
	homes   map[string]string
	args    map[string][]string
	ds      map[string]*daemon
}

func newHistOrg(t *testing.T, names ...string) *histOrg {
	t.Helper()
	return newHistOrgWith(t, nil, names...)
}

// newHistOrgWith is newHistOrg with further roster members that run no
// meshd (raw clients of a test), by name.
func newHistOrgWith(t *testing.T, extra map[string]proto.PubKey, names ...string) *histOrg {
	t.Helper()
	return newHistOrgArgs(t, extra, nil, names...)
}

// noChannelQuota lifts the per-sender channel quota (channel_sender_rate
// and channel_sender_mib_per_hour) for tests that load a mesh with one
// member's messages on purpose.
var noChannelQuota = []string{"--channel-sender-rate", "0", "--channel-sender-mib-per-hour", "0"}

// newHistOrgArgs is newHistOrgWith with args added to every node's.
func newHistOrgArgs(t *testing.T, extra map[string]proto.PubKey, args []string, names ...string) *histOrg {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	o := &histOrg{t: t, meshd: meshd, meshctl: meshctl, names: names,
		homes: map[string]string{}, args: map[string][]string{}, ds: map[string]*daemon{}}
	tmp := t.TempDir()
	keys := map[string]string{}
	for _, n := range names {
		o.homes[n] = filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", o.homes[n], "init", "--name", n)
		keys[n] = id.Key
	}
	admin := o.homes[names[0]]
	meshctlOK(t, meshctl, "--home", admin, "roster", "init", "--org", "acme")
	for _, n := range names[1:] {
		meshctlOK(t, meshctl, "--home", admin, "roster", "add", keys[n], "--role", "member", "--name", n)
	}
	for n, k := range extra {
		meshctlOK(t, meshctl, "--home", admin, "roster", "add", k.String(), "--role", "member", "--name", n)
	}
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(admin, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	base := append([]string{"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--log-level", "debug"}, args...)
	o.args[names[0]] = base
	for _, n := range names[1:] {
		o.args[n] = append(append([]string(nil), base...), "--roster", pinned, "--seed", "unix://"+filepath.Join(admin, "link.sock"))
	}
	for _, n := range names {
		o.start(n)
	}
	for _, n := range names {
		waitPeers(t, meshctl, o.homes[n], len(names)-1, 15*time.Second)
	}
	return o
}

// start starts (or restarts) node name and waits until it answers.
func (o *histOrg) start(name string) {
	o.t.Helper()
	o.ds[name] = startDaemon(o.t, o.meshd, o.homes[name], o.args[name]...)
	waitStatus(o.t, o.meshctl, o.homes[name], o.ds[name])
}

func (o *histOrg) ctl(name string, args ...string) string {
	o.t.Helper()
	return meshctlOK(o.t, o.meshctl, append([]string{"--home", o.homes[name]}, args...)...)
}

func (o *histOrg) client(name string) *api.Client {
	return api.NewClient(filepath.Join(o.homes[name], "meshd.sock"))
}

func (o *histOrg) waitChannel(name, ch string) {
	o.t.Helper()
	if !testwait.Until(10*time.Second, func() bool {
		return meshctlRun(o.t, o.meshctl, "--home", o.homes[name], "channel", "show", ch).code == 0
	}) {
		o.t.Fatalf("%s never learnt channel %s", name, ch)
	}
}

// historyIDs returns the ids of channel ch's messages in name's store,
// through the control API.
func (o *histOrg) historyIDs(name, ch string) map[string]bool {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := o.client(name).History(ctx, api.HistoryQuery{Channel: ch, Limit: api.MaxHistoryLimit})
	if err != nil {
		o.t.Fatalf("%s: history of %s: %v", name, ch, err)
	}
	out := make(map[string]bool, len(h.Messages))
	for _, m := range h.Messages {
		out[m.ID] = true
	}
	return out
}

// idSet is a set of envelope ids shared by goroutines.
type idSet struct {
	mu sync.Mutex
	m  map[string]bool
}

func newIDSet() *idSet { return &idSet{m: map[string]bool{}} }

func (s *idSet) add(id string) {
	s.mu.Lock()
	s.m[id] = true
	s.mu.Unlock()
}

func (s *idSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *idSet) snapshot() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.m))
	for k := range s.m {
		out[k] = true
	}
	return out
}

// missingFrom returns the ids of want not in got.
func missingFrom(want, got map[string]bool) []string {
	var out []string
	for id := range want {
		if !got[id] {
			out = append(out, id)
		}
	}
	return out
}

// streamDelivered reads GET /v1/events of the meshd at socket and adds
// the id of every delivered item to acked, until the stream ends. meshd
// publishes an item only once the commit that stored it is durable, so
// these are deliveries it has acknowledged. connected is closed once the
// stream is open.
func streamDelivered(ctx context.Context, socket string, acked *idSet, connected chan<- struct{}) error {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://meshd/v1/events", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	close(connected)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "item":
			var it struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &it); err == nil && it.ID != "" {
				acked.add(it.ID)
			}
		}
	}
	return sc.Err()
}

// TestCrashSafetyUnderLoad kills a reader with SIGKILL in the middle of
// heavy channel traffic (four publishers in a tight loop, the reader also
// sending), restarts it, and checks that every delivery it acknowledged
// (an item on its event stream) is in its store, that the store opened
// cleanly, that sending resumes in the same epoch above every number used
// before, and that it catches up on what it missed while down.
func TestCrashSafetyUnderLoad(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrgArgs(t, nil, noChannelQuota, "alice", "bob", "carol")
	o.ctl("alice", "channel", "create", "load")
	o.waitChannel("bob", "load")
	o.waitChannel("carol", "load")
	o.ctl("bob", "subscribe", "load")
	o.ctl("carol", "subscribe", "load")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bob := o.client("bob")
	seq0, err := bob.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}

	acked := newIDSet()
	connected := make(chan struct{})
	streamDone := make(chan error, 1)
	go func() { streamDone <- streamDelivered(ctx, bob.Socket, acked, connected) }()
	select {
	case <-connected:
	case err := <-streamDone:
		t.Fatalf("event stream: %v", err)
	}

	// Four publishers on alice, and bob sending too.
	published := newIDSet()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	pad := strings.Repeat("p", 200)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alice := o.client("alice")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s, err := alice.Send(ctx, api.Send{To: "#load", Body: fmt.Sprintf("load %d-%d %s", w, i, pad)})
				if err != nil {
					t.Errorf("alice send: %v", err)
					return
				}
				published.add(s.ID)
			}
		}()
	}
	var bobMaxSeq uint64
	bobDone := make(chan struct{})
	go func() {
		defer close(bobDone)
		for i := 0; ; i++ {
			s, err := bob.Send(ctx, api.Send{To: "#load", Body: fmt.Sprintf("bob %d", i)})
			if err != nil {
				return // killed
			}
			bobMaxSeq = max(bobMaxSeq, s.Seq)
			time.Sleep(2 * time.Millisecond) // deliberate: bob sends at a steady pace beside the load
		}
	}()

	if !testwait.Until(20*time.Second, func() bool { return acked.len() >= 1000 }) {
		t.Fatalf("bob acknowledged %d deliveries in 20 s", acked.len())
	}
	if err := o.ds["bob"].stop(syscall.SIGKILL); err == nil {
		t.Fatal("meshd exited cleanly on SIGKILL?")
	}
	<-streamDone
	<-bobDone
	acknowledged := acked.snapshot()
	// Traffic goes on while bob is down: alice publishes 100 more.
	downFrom := published.len()
	testwait.For(t, 20*time.Second, "alice publishing 100 messages while bob is down", func() bool { return published.len() >= downFrom+100 })
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	o.start("bob")
	// Every acknowledged delivery survived, read back with meshctl history.
	var h api.History
	meshctlJSON(t, o.meshctl, &h, "--home", o.homes["bob"], "history", "#load", "--limit", "10000")
	stored := map[string]bool{}
	for _, m := range h.Messages {
		stored[m.ID] = true
	}
	if miss := missingFrom(acknowledged, stored); len(miss) > 0 {
		t.Fatalf("%d of %d acknowledged deliveries lost in the crash, e.g. %s", len(miss), len(acknowledged), miss[0])
	}
	// Sending resumes in the same epoch, above every number used.
	seq1, err := bob.Sequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq1.Epoch != seq0.Epoch || seq1.NewEpoch {
		t.Fatalf("epoch after the crash %s (new %v), before %s", seq1.Epoch, seq1.NewEpoch, seq0.Epoch)
	}
	after, err := bob.Send(ctx, api.Send{To: "#load", Body: "after the crash"})
	if err != nil {
		t.Fatal(err)
	}
	if bobMaxSeq == 0 || after.Seq <= bobMaxSeq {
		t.Fatalf("first seq after the crash %d, last acknowledged before %d", after.Seq, bobMaxSeq)
	}
	// Bob catches up on what was published while it was down.
	all := published.snapshot()
	var miss []string
	if !testwait.Until(20*time.Second, func() bool { miss = missingFrom(all, o.historyIDs("bob", "load")); return len(miss) == 0 }) {
		t.Fatalf("bob still misses %d of %d published messages", len(miss), len(all))
	}
	t.Logf("published %d, bob acknowledged %d before SIGKILL; all kept; seq %d → %d in epoch %s",
		len(all), len(acknowledged), bobMaxSeq, after.Seq, seq1.Epoch)
}

// TestCatchUpConvergence: a reader offline while 5,000 channel messages of
// 1 KiB flow rejoins and ends with exactly the ids the other readers hold.
func TestCatchUpConvergence(t *testing.T) {
	// Not parallel: beside other tests, bob once held 4,999 of the 5,000
	// a minute after his restart, and no later round fetched the last
	// one. The cause was the catch-up's: two of alice's sends at once
	// crossed (number n stamped after n+1) at a page cut, paging raised
	// the mark past n, and the numbers paged in above the hole overflowed
	// the store's pending bound, which gave n up as lost. Paging now
	// keeps the mark below such a hole (history.NextHistoryRequest;
	// node TestCatchUpFillsACrossingAtAPageCut). It stays alone until
	// runs beside other tests show that was the only cause.
	const total = 5000
	o := newHistOrgArgs(t, nil, noChannelQuota, "alice", "bob", "carol")
	o.ctl("alice", "channel", "create", "conv")
	o.waitChannel("bob", "conv")
	o.waitChannel("carol", "conv")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 10*time.Second)

	// A bound for a hung send, not a speed: a loaded machine is slow.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pad := strings.Repeat("c", 1000)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alice := o.client("alice")
			for i := w; i < total; i += 8 {
				if _, err := alice.Send(ctx, api.Send{To: "#conv", Body: fmt.Sprintf("%05d %s", i, pad)}); err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := o.historyIDs("alice", "conv")
	if len(want) != total {
		t.Fatalf("alice stored %d of %d", len(want), total)
	}
	testwait.For(t, time.Minute, "carol to receive all messages live", func() bool {
		h, err := o.client("carol").History(ctx, api.HistoryQuery{Channel: "conv", Limit: 1})
		return err == nil && h.Stored >= total
	})

	start := time.Now()
	o.start("bob")
	bob := o.client("bob")
	var stored int
	if !testwait.Until(time.Minute, func() bool {
		h, err := bob.History(ctx, api.HistoryQuery{Channel: "conv", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		stored = h.Stored
		return stored >= total
	}) {
		// What the catch-up missed, and what its rounds did, for the
		// open defect this once showed (see BENCHMARKS.md "Test suite").
		missing := missingFrom(want, o.historyIDs("bob", "conv"))
		c := counters(t, o.meshctl, o.homes["bob"])
		sync := map[string]uint64{}
		for k, v := range c {
			if strings.HasPrefix(k, "sync.") || strings.HasPrefix(k, "history.") {
				sync[k] = v
			}
		}
		t.Fatalf("bob holds %d of %d after a minute; %d missing, e.g. %v; bob's counters %v",
			stored, total, len(missing), missing[:min(len(missing), 10)], sync)
	}
	took := time.Since(start)
	got := o.historyIDs("bob", "conv")
	carol := o.historyIDs("carol", "conv")
	if len(got) != len(want) || len(missingFrom(want, got)) > 0 || len(carol) != len(want) || len(missingFrom(want, carol)) > 0 {
		t.Fatalf("sets differ: alice %d, bob %d (missing %d), carol %d (missing %d)",
			len(want), len(got), len(missingFrom(want, got)), len(carol), len(missingFrom(want, carol)))
	}
	t.Logf("bob caught up %d messages in %v (process start included)", total, took.Round(time.Millisecond))
}

// TestDMToOfflinePeerSurvivesSenderRestart: a DM to a peer that is down is
// kept by the sender, survives the sender being killed and restarted, and
// is delivered when the peer returns.
func TestDMToOfflinePeerSurvivesSenderRestart(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "dave")
	if err := o.ds["dave"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, o.meshctl, o.homes["alice"], 0, 10*time.Second)
	var sent api.Sent
	meshctlJSON(t, o.meshctl, &sent, "--home", o.homes["alice"], "dm", "dave", "while you were out")
	if !sent.Queued || len(sent.SentTo) != 0 {
		t.Fatalf("dm to an offline peer: %+v, want it queued", sent)
	}
	o.ds["alice"].stop(syscall.SIGKILL)
	o.start("alice")
	o.start("dave")
	var in inboxJSON
	var found *itemJSON
	if !testwait.Until(15*time.Second, func() bool {
		in = inboxJSON{}
		meshctlJSON(t, o.meshctl, &in, "--home", o.homes["dave"], "inbox", "--all")
		for i := range in.Items {
			if in.Items[i].ID == sent.ID {
				found = &in.Items[i]
			}
		}
		return found != nil
	}) {
		t.Fatalf("the kept DM did not reach dave within 15 s; inbox %+v", in.Items)
	}
	if found.Body != "while you were out" || found.Kind != "message" || found.From.Name != "alice" || found.Priority != "high" {
		t.Fatalf("dave's item: %+v", *found)
	}
	// Delivered once: alice's queue is empty, so a relink sends nothing again.
	o.ds["dave"].stop(syscall.SIGTERM)
	o.start("dave")
	waitPeers(t, o.meshctl, o.homes["dave"], 1, 10*time.Second)
	// A DM sent after the relink goes out behind anything alice sends when
	// the link comes up: once it is in, a second copy would be too.
	var marker api.Sent
	meshctlJSON(t, o.meshctl, &marker, "--home", o.homes["alice"], "dm", "dave", "after the relink")
	n := 0
	if !testwait.Until(15*time.Second, func() bool {
		in = inboxJSON{}
		meshctlJSON(t, o.meshctl, &in, "--home", o.homes["dave"], "inbox", "--all")
		markers := 0
		n = 0
		for _, it := range in.Items {
			switch it.ID {
			case sent.ID:
				n++
			case marker.ID:
				markers++
			}
		}
		return markers > 0
	}) {
		t.Fatalf("the DM sent after the relink did not reach dave within 15 s; inbox %+v", in.Items)
	}
	if n != 1 {
		t.Fatalf("the DM is in dave's inbox %d times", n)
	}
}

func TestHistoryConfig(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	cfg, err := resolve(t, []string{"--home", dir, "--sync-peers", "2", "--sync-timeout", "2s"}, map[string]string{"MESH_RETENTION_INTERVAL": "30s"})
	if err != nil {
		t.Fatal(err)
	}
	nc, _, err := nodeConfig(cfg, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if nc.SyncPeers != 2 || nc.SyncTimeout != 2*time.Second || nc.RetentionInterval != 30*time.Second || nc.ArchiveRetention != 720*time.Hour {
		t.Fatalf("sync peers %d, sync timeout %v, retention interval %v, archive retention %v",
			nc.SyncPeers, nc.SyncTimeout, nc.RetentionInterval, nc.ArchiveRetention)
	}
	for _, args := range [][]string{
		{"--archive-retention", "5m"},
		{"--retention-interval", "soon"},
		{"--sync-peers", "0"},
		{"--sync-timeout", "0s"},
	} {
		cfg, err := resolve(t, append([]string{"--home", dir}, args...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := nodeConfig(cfg, os.Stderr); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
