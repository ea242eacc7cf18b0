package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// procMemKiB returns VmRSS and VmHWM of pid, in KiB.
func procMemKiB(pid int) (rss, hwm int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	return rss, hwm, nil
}

// TestNonReadingMemberBoundedMemory is issue 15 §4 as an attacker runs
// it: a roster member links to a real meshd, never reads its socket, and
// keeps asking for the history of a channel of 200 messages of 200 KB.
// The victim's resident memory stays under 160 MiB through the attack
// (20 s when measuring, else until every defence below has acted); the link is
// closed when a write blocks past the write deadline (the idle timeout,
// 4 s here), the member's reconnects are refused during the backoff, and
// history pages are not read while its send queue is full.
//
// MESHD_SLOWPEER_BIN=/path/to/meshd runs the same attack against another
// build (for the figure before the fix) and only reports the memory.
func TestNonReadingMemberBoundedMemory(t *testing.T) {
	// In parallel, first: it waits on the victim's write deadline and
	// its backoff far more than it uses the CPU, and other tests' load
	// changes how fast the victim serves, not what it may hold.
	testpar.First(t)
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read the victim's memory")
	}
	other := os.Getenv("MESHD_SLOWPEER_BIN")
	rt := startRawTarget(t, other, "hostile",
		"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--keepalive", "1s", "--idle-timeout", "4s")
	meshctl, h, d, s, key, me, target := rt.meshctl, rt.home, rt.d, rt.status, rt.key, rt.pub, rt.target

	// The channel: 200 messages of 200 KB, written through the control API.
	cl := api.NewClient(filepath.Join(h, "meshd.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := cl.CreateChannel(ctx, api.CreateChannel{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	chID, err := uuid.Parse(ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		body := strings.Repeat(fmt.Sprintf("message %03d ", i), 200<<10/12)
		if _, err := cl.Send(ctx, api.Send{To: "#big", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	rss0, _, err := procMemKiB(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	// The hostile member: its handler blocks on the first frame, so its
	// link reads nothing more; its writer sends history requests.
	cfg := transport.DefaultConfig()
	cfg.Identity = key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: s.RosterVersion} }
	addr := transport.Addr{Network: "tcp", Address: strings.TrimPrefix(tcpListen(t, s), "tcp://")}
	epoch := proto.NewEpoch()
	var seq uint64
	var dials, linked, requests atomic.Int64
	attack := func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			dials.Add(1)
			dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
			l, err := transport.Dial(dctx, addr, cfg, &target)
			dcancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond) // deliberate: the attacker redials at a steady pace
				continue
			}
			linked.Add(1)
			release := make(chan struct{})
			l.Start(func([]byte) { <-release })
			tick := time.NewTicker(10 * time.Millisecond)
		link:
			for {
				select {
				case <-stop:
					break link
				case <-tick.C:
				}
				if l.Err() != nil {
					break
				}
				seq++
				se, err := proto.SignEnvelope(key, &proto.Envelope{ID: proto.NewID(), From: me, To: proto.ToPeer(target),
					Kind: proto.KindHistoryRequest, TS: time.Now().UnixMilli(), TTL: 300, Seq: seq, Epoch: epoch,
					HistoryRequest: &proto.HistoryRequest{ChannelID: chID, MaxMessages: proto.MaxHistoryMessages, MaxBytes: proto.MaxHistoryBytes}})
				if err != nil {
					t.Error(err)
					break
				}
				if l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)) == nil {
					requests.Add(1)
				}
			}
			tick.Stop()
			close(release)
			l.CloseWithError(nil)
			<-l.Done()
			time.Sleep(100 * time.Millisecond) // deliberate: a reconnecting client paces its redials
		}
	}
	stop := make(chan struct{})
	attacked := make(chan struct{})
	go func() { defer close(attacked); attack(stop) }()

	// RSS is sampled through the attack. The figures in SECURITY.md are
	// over 20 s (MESHD_BENCH=1, or against another build); otherwise the
	// attack ends once every defence has acted (a page served, one
	// dropped unread for a full queue, the slow close and a refused
	// reconnect), at least 6 s in and at most 20 s.
	const longest, limitMiB = 20 * time.Second, 160
	fixed := measuring() || other != ""
	fought := func() bool {
		st, err := cl.Status(ctx)
		if err != nil {
			return false
		}
		c := st.Counters
		return c["history.served"] > 0 && c["history.serve_no_room"] > 0 && c["link.closed_slow"] > 0 && c["link.refused_slow"] > 0
	}
	maxRSS := 0
	start := time.Now()
	for k := 0; time.Since(start) < longest; k++ {
		rss, _, err := procMemKiB(d.cmd.Process.Pid)
		if err != nil {
			close(stop)
			<-attacked
			t.Fatalf("victim gone: %v\n%s", err, d.stderr.String())
		}
		maxRSS = max(maxRSS, rss)
		if !fixed && k%5 == 0 && time.Since(start) >= 6*time.Second && fought() {
			break
		}
		time.Sleep(100 * time.Millisecond) // deliberate: RSS is sampled through the whole window
	}
	window := time.Since(start).Round(100 * time.Millisecond)
	close(stop)
	<-attacked
	_, hwm, _ := procMemKiB(d.cmd.Process.Pid)

	var st struct {
		Counters map[string]uint64 `json:"counters"`
	}
	if err := json.Unmarshal([]byte(meshctlOK(t, meshctl, "--home", h, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	c := st.Counters
	t.Logf("victim RSS: %d MiB before the attack, at most %d MiB during %v of it (VmHWM %d MiB); %d dials, %d links, %d requests sent",
		rss0>>10, maxRSS>>10, window, hwm>>10, dials.Load(), linked.Load(), requests.Load())
	t.Logf("counters: history.served %d, history.serve_no_room %d, history.serve_paced %d, drop.history_busy %d, link.closed_slow %d, link.refused_slow %d, link.send_queue_full %d",
		c["history.served"], c["history.serve_no_room"], c["history.serve_paced"], c["drop.history_busy"], c["link.closed_slow"], c["link.refused_slow"], c["link.send_queue_full"])
	if other != "" {
		return
	}
	if maxRSS>>10 >= limitMiB {
		t.Errorf("victim RSS reached %d MiB, limit %d MiB", maxRSS>>10, limitMiB)
	}
	if c["history.served"] == 0 {
		t.Error("no history page served: the attack did not run")
	}
	if c["history.serve_no_room"] == 0 {
		t.Error("history.serve_no_room = 0: pages were read for a full queue")
	}
	if c["link.closed_slow"] == 0 {
		t.Error("link.closed_slow = 0: the non-reading link was not closed at the write deadline")
	}
	if c["link.refused_slow"] == 0 {
		t.Error("link.refused_slow = 0: reconnects were not refused during the backoff")
	}
	if !strings.Contains(d.stderr.String(), "the peer stopped reading") {
		t.Error("the slow close is not logged")
	}
}
