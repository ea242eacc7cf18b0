package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// linkSendQueue scrapes meshd's metrics at url for the frames waiting in
// its links' send queues.
func linkSendQueue(t *testing.T, url string) float64 {
	t.Helper()
	mfs := scrapeFamilies(t, url)
	for _, m := range mfs["meshd_queue_length"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "queue" && lp.GetValue() == "link_send" {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatal("no meshd_queue_length{queue=\"link_send\"} series")
	return 0
}

// TestDuplicateLoserQueueReachesWinner: a member's link to a real meshd
// stops reading (its socket's receive buffer is small and never read), so
// channel messages pile up in meshd's send queue for it. The member then
// links again, as after a restart: the new link wins the duplicate pair,
// and the messages queued on the old one arrive on the new one at once,
// in order. The member runs no history catch-up, so nothing but the
// queue moving could bring them.
//
// MESHD_DUPLINK_BIN=/path/to/meshd runs the same steps against another
// build (one without the fix loses the messages and fails).
func TestDuplicateLoserQueueReachesWinner(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, os.Getenv("MESHD_DUPLINK_BIN"), "restarter",
		"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--metrics", "127.0.0.1:0")
	metrics := "http://" + waitMetricsAddr(t, rt.d) + "/metrics"
	cl := api.NewClient(filepath.Join(rt.home, "meshd.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cl.CreateChannel(ctx, api.CreateChannel{Name: "dup"}); err != nil {
		t.Fatal(err)
	}

	cfg := transport.DefaultConfig()
	cfg.Identity = rt.key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: rt.status.RosterVersion} }
	addr := strings.TrimPrefix(tcpListen(t, rt.status), "tcp://")

	// The first link: a small receive buffer, never read.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	first, err := transport.Client(ctx, conn, cfg, &rt.target)
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseWithError(nil)
	waitFor(t, "the member linked", 10*time.Second, func() bool {
		_, ok := peerKeys(t, rt.meshctl, rt.home)[rt.pub.String()]
		return ok
	})

	// Messages of 60 KB until meshd's writer is stuck and frames wait in
	// its queue, then the ones the test follows, queued behind them (16
	// frames of 60 KB are far more than the one batch the writer holds).
	body := strings.Repeat("x", 60<<10)
	filled := false
	sentBig, fillStart := 0, time.Now()
	for i := 0; i < 400 && !filled; i++ {
		sentBig++
		if _, err := cl.Send(ctx, api.Send{To: "#dup", Body: body}); err != nil {
			t.Fatal(err)
		}
		filled = i%4 == 3 && linkSendQueue(t, metrics) >= 16
	}
	if !filled {
		t.Fatal("meshd's send queue to the member never filled")
	}
	t.Logf("queue filled after %d messages, %v", sentBig, time.Since(fillStart))
	var want []string
	for i := range 3 {
		sent, err := cl.Send(ctx, api.Send{To: "#dup", Body: fmt.Sprintf("queued behind a stuck writer %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, sent.ID)
	}
	if q := linkSendQueue(t, metrics); q < float64(len(want)) {
		t.Fatalf("meshd's link send queue holds %v frames, want at least the %d followed", q, len(want))
	}

	// The second link: another Noise static key, as a restarted member
	// presents, so it wins over the first.
	var mu sync.Mutex
	pos := map[string]int{}
	count := 0
	got := make(chan struct{}, 1)
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	second, err := transport.Dial(dctx, transport.Addr{Network: "tcp", Address: addr}, cfg, &rt.target)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	linkedAt := time.Now()
	second.Start(func(f []byte) {
		if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameEnvelope {
			return
		}
		se, err := proto.ParseEnvelope(f[1:])
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		count++
		if _, seen := pos[se.ID.String()]; !seen {
			pos[se.ID.String()] = count
		}
		select {
		case got <- struct{}{}:
		default:
		}
	})
	all := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range want {
			if _, ok := pos[id]; !ok {
				return false
			}
		}
		return true
	}
	deadline := time.After(10 * time.Second)
	for !all() {
		select {
		case <-got:
		case <-deadline:
			t.Fatalf("the messages queued on the first link did not arrive on the second within 10 s (link.rehomed_frames %v)",
				counters(t, rt.meshctl, rt.home)["link.rehomed_frames"])
		}
	}
	took := time.Since(linkedAt)
	mu.Lock()
	for i := 1; i < len(want); i++ {
		if pos[want[i]] < pos[want[i-1]] {
			t.Errorf("message %d arrived before message %d", i, i-1)
		}
	}
	frames := count
	mu.Unlock()
	select {
	case <-first.Done():
	default:
		// meshd closed its end; ours sees that once it reads.
	}
	c := counters(t, rt.meshctl, rt.home)
	t.Logf("the followed messages arrived %v after the second link came up, among %d envelopes; link.duplicate %d, link.rehomed_frames %d",
		took.Round(time.Millisecond), frames, c["link.duplicate"], c["link.rehomed_frames"])
	if c["link.rehomed_frames"] < uint64(len(want)) {
		t.Errorf("link.rehomed_frames = %d, want at least %d", c["link.rehomed_frames"], len(want))
	}
}

// TestDuplicateNewLoserReadByMeshd: a member process keeps one Noise
// static key, so when it opens a second link to a real meshd, the one with
// the higher session id loses the duplicate pair. A DM the member sends
// on a new link right after its handshake is read and stored by meshd
// even when that link loses (meshd reads a losing link until the
// member's side ends), and its ack comes back on the link meshd kept.
func TestDuplicateNewLoserReadByMeshd(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, os.Getenv("MESHD_DUPLINK_BIN"), "onekey",
		"--listen", "tcp://127.0.0.1:0", "--no-mdns")
	static, err := transport.NewStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := transport.DefaultConfig()
	cfg.Identity = rt.key
	cfg.Org = "acme"
	cfg.NoiseKey = static
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: rt.status.RosterVersion} }
	addr := transport.Addr{Network: "tcp", Address: strings.TrimPrefix(tcpListen(t, rt.status), "tcp://")}

	type link struct {
		l   *transport.Link
		bye chan struct{}
	}
	var mu sync.Mutex
	ackedOn := map[string]*transport.Link{}
	epoch, seq := proto.NewEpoch(), uint64(0)
	dial := func(first []byte) *link {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := transport.Dial(ctx, addr, cfg, &rt.target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if first != nil {
			if err := l.Send(first); err != nil {
				t.Fatal(err)
			}
		}
		k := &link{l: l, bye: make(chan struct{})}
		var once sync.Once
		l.Start(func(f []byte) {
			if len(f) == 0 {
				return
			}
			switch proto.FrameType(f[0]) {
			case proto.FrameGoodbye:
				once.Do(func() { close(k.bye) })
			case proto.FrameAck:
				if a, err := proto.ParseAck(f[1:]); err == nil {
					mu.Lock()
					for _, id := range a.IDs {
						ackedOn[id.String()] = l
					}
					mu.Unlock()
				}
			}
		})
		return k
	}
	kept := dial(nil)
	waitFor(t, "the member linked", 10*time.Second, func() bool {
		_, ok := peerKeys(t, rt.meshctl, rt.home)[rt.pub.String()]
		return ok
	})
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("20 links from the member, none lost the duplicate pair")
		}
		seq++
		se, err := proto.SignEnvelope(rt.key, &proto.Envelope{ID: proto.NewID(), From: rt.pub, To: proto.ToPeer(rt.target),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: seq, Epoch: epoch,
			Message: &proto.Message{Body: fmt.Sprintf("sent on link %d", attempt+2)}})
		if err != nil {
			t.Fatal(err)
		}
		id := se.ID.String()
		nl := dial(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...))
		var loser, winner *link
		select {
		case <-nl.bye:
			loser, winner = nl, kept
		case <-kept.bye:
			loser, winner = kept, nl
		case <-time.After(10 * time.Second):
			t.Fatal("no goodbye on either link")
		}
		var on *transport.Link
		waitFor(t, "the DM acked", 5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			on = ackedOn[id]
			return on != nil
		})
		if on != winner.l {
			t.Fatalf("attempt %d: the ack came on the losing link", attempt)
		}
		kept = winner
		if loser == nl {
			t.Logf("link %d lost the pair; the DM sent on it was stored and acked on the kept link", attempt+2)
			c := counters(t, rt.meshctl, rt.home)
			if c["link.duplicate"] == 0 {
				t.Error("link.duplicate not counted")
			}
			return
		}
	}
}
