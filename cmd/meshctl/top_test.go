package main

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// tickingMeshd is a fake meshd whose counters move: each GET /v1/status
// is one second later by its clock, with 10 more envelopes in, 4 more out
// (3 sent, 1 re-sent), 2 more delivered and 1 more duplicate dropped.
type tickingMeshd struct {
	home    string
	started time.Time

	mu    sync.Mutex
	calls int // guarded by mu: status answers given
}

var (
	topKeyBob   = proto.PubKey{2}
	topKeyCarol = proto.PubKey{3}
)

func newTickingMeshd(t *testing.T) *tickingMeshd {
	t.Helper()
	home, err := os.MkdirTemp("", "meshctl-top")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ln, err := net.Listen("unix", filepath.Join(home, "meshd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	f := &tickingMeshd{home: home, started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", f.status)
	mux.HandleFunc("GET /v1/peers", f.peers)
	mux.HandleFunc("GET /v1/presence", f.presence)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *tickingMeshd) uptime() float64 { return 100 + float64(f.calls) }

func (f *tickingMeshd) status(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	f.calls++
	n := uint64(f.calls)
	up := f.uptime()
	f.mu.Unlock()
	json.NewEncoder(w).Encode(api.Status{Name: "alice", Fingerprint: "cd8305ebf84dd61e", Role: "admin", Org: "acme",
		RosterVersion: 3, Links: 2, Started: f.started, UptimeSeconds: up,
		Counters: map[string]uint64{"rx.envelopes": 10 * n, "tx.envelopes": 3 * n, "tx.forwarded": n,
			"inbox.items": 2 * n, "drop.duplicate": n, "tx.dropped.queue": 5, "link.up": 2}})
}

func (f *tickingMeshd) peers(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	now := f.started.Add(time.Duration(f.uptime() * float64(time.Second)))
	f.mu.Unlock()
	json.NewEncoder(w).Encode(api.Peers{Peers: []api.Peer{
		{Key: topKeyBob, Fingerprint: "036db26857d83aba", Name: "bob", Role: "operator", Address: "127.0.0.1:45744",
			Network: "tcp", Direction: "inbound", LinkAgeSeconds: 62, LastSeen: now.Add(-2 * time.Second)},
		{Key: topKeyCarol, Fingerprint: "ac91f9630116bb8e", Role: "member", Address: "unix:///tmp/c/link.sock",
			Network: "unix", Direction: "outbound", LinkAgeSeconds: 5, LastSeen: now},
	}})
}

func (f *tickingMeshd) presence(w http.ResponseWriter, _ *http.Request) {
	json.NewEncoder(w).Encode(api.Presence{TTLSeconds: 300, Entries: []api.PresenceEntry{
		{Party: api.Party{Key: topKeyBob, Name: "bob"}, State: "away"}}})
}

func (f *tickingMeshd) statusCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestTopJSON(t *testing.T) {
	t.Parallel()
	f := newTickingMeshd(t)
	out := ok(t, "--home", f.home, "top", "--json", "--interval", "10ms")
	s := decode[topSnapshot](t, out)
	if s.IntervalSeconds != 1 {
		t.Fatalf("interval %v, want meshd's 1s between samples", s.IntervalSeconds)
	}
	tr := s.Traffic
	if tr.EnvelopesIn != 20 || tr.EnvelopesOut != 8 || tr.Delivered != 4 ||
		tr.EnvelopesInPerSec != 10 || tr.EnvelopesOutPerSec != 4 || tr.DeliveredPerSec != 2 {
		t.Fatalf("traffic %+v", tr)
	}
	want := []topDrop{{Reason: "duplicate", Total: 2, PerSec: 1}, {Reason: "tx.dropped.queue", Total: 5, PerSec: 0}}
	if len(s.Drops) != 2 || s.Drops[0] != want[0] || s.Drops[1] != want[1] {
		t.Fatalf("drops %+v, want %+v", s.Drops, want)
	}
	if len(s.Peers) != 2 || s.Peers[0].Presence != "away" || s.Peers[1].Presence != "unknown" ||
		math.Abs(s.Peers[0].LastSeenSeconds-2) > 0.01 || s.Peers[0].LinkAgeSeconds != 62 {
		t.Fatalf("peers %+v", s.Peers)
	}
	if s.Node.Name != "alice" || s.Node.Links != 2 || s.Node.RosterVersion != 3 {
		t.Fatalf("node %+v", s.Node)
	}
	if f.statusCalls() != 2 {
		t.Fatalf("%d status calls, want 2 (one interval)", f.statusCalls())
	}
}

func TestTopOnce(t *testing.T) {
	t.Parallel()
	f := newTickingMeshd(t)
	out := ok(t, "--home", f.home, "top", "--once", "--interval", "10ms")
	if strings.Contains(out, "\x1b[") {
		t.Fatalf("--once output has terminal escapes: %q", out)
	}
	for _, want := range []string{
		"meshd alice (cd8305ebf84dd61e)  admin of acme, roster v3  links 2",
		"envelopes  in 10.0/s  out 4.0/s  delivered 2.0/s   (totals: in 20, out 8, delivered 4)",
		"PEER", "bob", "operator", "away", "127.0.0.1:45744", "1m2s", "2s ago",
		"ac91f9630116bb8e", "unix", "outbound", "unknown",
		"DROPS BY REASON", "duplicate", "1.0/s", "tx.dropped.queue",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("top --once lacks %q:\n%s", want, out)
		}
	}
}

func TestTopLive(t *testing.T) {
	// Not parallel: it replaces interruptContext, which every
	// command that runs until stopped reads.
	f := newTickingMeshd(t)
	ctx, cancel := context.WithCancel(context.Background())
	old := interruptContext
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { interruptContext = old; cancel() })
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run([]string{"--home", f.home, "top", "--interval", "10ms"}, nil, stdout, stderr) }()
	if !testwait.Until(5*time.Second, func() bool { return strings.Count(stdout.String(), "\x1b[H\x1b[2J") >= 3 }) {
		t.Fatalf("fewer than 3 frames in 5s:\n%q", stdout.String())
	}
	cancel() // Ctrl-C
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after Ctrl-C: %s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("top did not stop on Ctrl-C")
	}
	frames := strings.Split(stdout.String(), "\x1b[H\x1b[2J")[1:]
	// The first frame has no rates yet; later ones do.
	if !strings.Contains(frames[0], "in -  out -") || !strings.Contains(frames[1], "in 10.0/s  out 4.0/s") {
		t.Fatalf("frames:\n%s\n---\n%s", frames[0], frames[1])
	}
	if !strings.Contains(frames[1], "Ctrl-C to quit") {
		t.Fatalf("frame lacks the quit hint:\n%s", frames[1])
	}
}

func TestTopErrors(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "none")
	fails(t, 1, []string{"--home", home, "top", "--once"}, "hint: start it with: meshd")
	fails(t, 2, []string{"--home", home, "top", "extra"}, `unexpected argument "extra"`)
	fails(t, 2, []string{"--home", home, "top", "--interval", "1ms"}, "at least 10ms")
}

func TestTopFrameAcrossRestart(t *testing.T) {
	t.Parallel()
	started := time.Now()
	st := func(start time.Time, up float64, rx uint64) *topSample {
		return &topSample{status: &api.Status{Started: start, UptimeSeconds: up,
			Counters: map[string]uint64{"rx.envelopes": rx}}}
	}
	// A restarted meshd starts its counters again: no rate, not a negative one.
	s := topFrame(st(started, 50, 1000), st(started.Add(time.Minute), 1, 3))
	if s.IntervalSeconds != 0 || s.Traffic.EnvelopesInPerSec != 0 || s.Traffic.EnvelopesIn != 3 {
		t.Fatalf("across a restart: %+v", s)
	}
	s = topFrame(st(started, 50, 1000), st(started, 52, 1010))
	if s.IntervalSeconds != 2 || s.Traffic.EnvelopesInPerSec != 5 {
		t.Fatalf("2s apart: %+v", s)
	}
	if s := topFrame(nil, st(started, 1, 3)); s.IntervalSeconds != 0 || len(s.Peers) != 0 || s.Drops == nil {
		t.Fatalf("first sample: %+v", s)
	}
}
