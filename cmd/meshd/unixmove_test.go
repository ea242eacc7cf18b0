package main

import (
	"context"
	"fmt"
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
)

// dmStream sends DMs from one node to another (or, when to starts with
// '#', messages to that channel) until stopped, and keeps the bodies it
// sent.
type dmStream struct {
	from, to string
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	bodies   []string
	err      error
}

func startDMStream(cl *api.Client, from, to string) *dmStream {
	s := &dmStream{from: from, to: to, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			body := fmt.Sprintf("%s to %s %d", s.from, s.to, i)
			to := s.to
			if !strings.HasPrefix(to, "#") {
				to = "@" + to
			}
			if _, err := cl.Send(ctx, api.Send{To: to, Body: body}); err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.bodies = append(s.bodies, body)
			s.mu.Unlock()
		}
	}()
	return s
}

// end stops the stream and returns what it sent.
func (s *dmStream) end(t *testing.T) []string {
	t.Helper()
	close(s.stop)
	<-s.done
	if s.err != nil {
		t.Fatalf("%s sending to %s: %v", s.from, s.to, s.err)
	}
	return s.bodies
}

// inboxBodies counts the bodies of node's inbox items from sender.
func inboxBodies(t *testing.T, cl *api.Client, sender string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]int{}
	err := cl.InboxPages(ctx, api.InboxQuery{Cursor: api.CursorStart}, 10*time.Second, func(in *api.Inbox) error {
		for _, it := range in.Items {
			if it.From.Name == sender {
				out[it.Body]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSameHostLinksMoveToUnix runs three meshd processes on one host,
// each listening on TCP and on its Unix socket, seeded only by TCP
// addresses (no mDNS). Every link, first made over TCP, moves to a Unix
// socket, and DMs sent in a ring while the links form and move (alice's
// to bob queued before bob starts, flushed on the TCP link as it comes
// up) all arrive, each once.
func TestSameHostLinksMoveToUnix(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	names := []string{"alice", "bob", "carol"}
	homes, keys := map[string]string{}, map[string]string{}
	for _, n := range names {
		homes[n] = filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", homes[n], "init", "--name", n)
		keys[n] = id.Key
	}
	a := homes["alice"]
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	for _, n := range names[1:] {
		meshctlOK(t, meshctl, "--home", a, "roster", "add", keys[n], "--role", "member", "--name", n)
	}
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	client := func(n string) *api.Client { return api.NewClient(filepath.Join(homes[n], "meshd.sock")) }

	ds := map[string]*daemon{}
	ds["alice"] = startDaemon(t, meshd, a, append([]string{"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--log-level", "debug",
		"--metrics", "127.0.0.1:0"}, noChannelQuota...)...)
	seed := tcpListen(t, waitStatus(t, meshctl, a, ds["alice"]))
	meshctlOK(t, meshctl, "--home", a, "channel", "create", "live")
	streams := []*dmStream{startDMStream(client("alice"), "alice", "bob")}
	live := startDMStream(client("alice"), "alice", "#live")
	for _, n := range names[1:] {
		ds[n] = startDaemon(t, meshd, homes[n], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--log-level", "debug",
			"--metrics", "127.0.0.1:0", "--roster", pinned, "--seed", seed)
	}
	for _, n := range names[1:] {
		waitStatus(t, meshctl, homes[n], ds[n])
	}
	streams = append(streams, startDMStream(client("bob"), "bob", "carol"), startDMStream(client("carol"), "carol", "alice"))

	// Every node ends with both links on Unix sockets.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		var pk map[string]string
		if !testwait.Until(time.Until(deadline), func() bool {
			pk = peerKeys(t, meshctl, homes[n])
			unix := 0
			for _, nw := range pk {
				if nw == "unix" {
					unix++
				}
			}
			return len(pk) == 2 && unix == 2
		}) {
			t.Fatalf("%s: peers %v, want both on unix\n%s", n, pk, ds[n].stderr.String())
		}
	}
	// meshctl status counts the links by transport.
	if st := meshctlOK(t, meshctl, "--home", a, "status"); !strings.Contains(st, "(unix 2)") {
		t.Fatalf("alice's status does not count two Unix links:\n%s", st)
	}
	// meshctl peers shows the transport.
	txt := meshctlOK(t, meshctl, "--home", a, "peers")
	if !strings.Contains(txt, "unix") || strings.Contains(txt, "tcp") {
		t.Fatalf("alice's peers text does not show Unix links:\n%s", txt)
	}
	// Each of the three pairs first linked over TCP (the seed, then
	// gossiped TCP addresses), so each moved once.
	moves := 0
	for _, n := range names {
		moves += strings.Count(ds[n].stderr.String(), "link moved to the Unix socket")
	}
	if moves < 3 {
		t.Fatalf("%d moves logged, want one per pair", moves)
	}

	// The streams ran across the moves: all arrive, each once.
	for _, s := range streams {
		sent := s.end(t)
		if len(sent) == 0 {
			t.Fatalf("%s sent nothing to %s", s.from, s.to)
		}
		var got map[string]int
		missing := 0
		if !testwait.Until(30*time.Second, func() bool {
			got = inboxBodies(t, client(s.to), s.from)
			missing = 0
			for _, body := range sent {
				if got[body] == 0 {
					missing++
				}
			}
			return missing == 0
		}) {
			t.Fatalf("%s's inbox lacks %d of the %d DMs from %s", s.to, missing, len(sent), s.from)
		}
		for body, c := range got {
			if c != 1 {
				t.Fatalf("%s's inbox holds %q %d times", s.to, body, c)
			}
		}
		if len(got) != len(sent) {
			t.Fatalf("%s's inbox holds %d DMs from %s, %d were sent", s.to, len(got), s.from, len(sent))
		}
		t.Logf("%s -> %s: %d DMs, each once", s.from, s.to, len(sent))
	}
	// The channel messages alice sent across the moves are in both
	// readers' stores.
	sentLive := live.end(t)
	for _, n := range names[1:] {
		missing := 0
		if !testwait.Until(30*time.Second, func() bool {
			got := map[string]bool{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			h, err := client(n).History(ctx, api.HistoryQuery{Channel: "live", Limit: api.MaxHistoryLimit})
			cancel()
			if err != nil {
				t.Fatalf("%s: history: %v", n, err)
			}
			for _, m := range h.Messages {
				got[m.Body] = true
			}
			missing = 0
			for _, b := range sentLive {
				if !got[b] {
					missing++
				}
			}
			return missing == 0
		}) {
			t.Fatalf("%s's history of #live lacks %d of %d messages", n, missing, len(sentLive))
		}
	}
	t.Logf("alice -> #live: %d messages in both readers' stores", len(sentLive))

	// No envelope was refused by a link on the way: the frames of each
	// retired TCP link went on its Unix successor.
	for _, n := range names {
		mfs := scrapeFamilies(t, "http://"+waitMetricsAddr(t, ds[n])+"/metrics")
		for _, fam := range []string{"meshd_frames_send_dropped_total", "meshd_envelopes_send_dropped_total"} {
			for _, m := range mfs[fam].GetMetric() {
				if v := m.GetCounter().GetValue(); v != 0 {
					t.Fatalf("%s: %s %v = %v", n, fam, m.GetLabel(), v)
				}
			}
		}
		moved := 0.0
		for _, m := range mfs["meshd_link_events_total"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == "moved_unix" {
					moved += m.GetCounter().GetValue()
				}
			}
		}
		t.Logf("%s: %v links moved", n, moved)
	}
	for _, n := range names {
		if err := ds[n].stop(syscall.SIGTERM); err != nil {
			t.Fatalf("%s shutdown: %v", n, err)
		}
	}
}
