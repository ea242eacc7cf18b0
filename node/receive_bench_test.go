//go:build linux

package node

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// BenchmarkReceive feeds pre-signed 1 KiB envelope frames from node a
// straight into node b's frame handler (as its link reader would) and
// waits until b has stored each one, put it in its inbox and written its
// mailbox file. It isolates the receive side of one reader: parse, dedupe,
// verify, checks, commit, mirror. allocs/op is per delivered envelope
// (process-wide, so it includes bbolt and, for DMs, a's handling of b's
// acks). cpu-µs/op is the process's CPU per envelope; ns/op is mostly
// waiting for fsync.
//
// channel_watched adds a reader of the event stream that renders every
// item as GET /v1/events does; at 2000x run it in a process of its own,
// since one member's channel quota refuses a second 2000 messages.
//
//	go test -run='^$' -bench='Receive/(channel|dm)$' -benchmem -benchtime=2000x ./node
//	go test -run='^$' -bench=Receive/channel_watched -benchmem -benchtime=2000x ./node
func BenchmarkReceive(b *testing.B) {
	m, a, rd := linkedPair(b)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	waitFor(b, 10*time.Second, "policy", func() bool { _, ok := rd.chans.Set().ByName("bench"); return ok })
	if _, err := rd.chans.SetSubscription("bench", "subscribed"); err != nil {
		b.Fatal(err)
	}
	// Let the join's catch-up round finish first.
	waitFor(b, 10*time.Second, "join round", func() bool { return rd.metrics.Get("sync.responses") > 0 })
	// Counted where the commit stage puts an envelope in the inbox.
	delivered := func() int64 { return int64(rd.metrics.Get("inbox.items")) }
	pl := rd.peers.Linked(m.ids[0].Pub)
	if pl == nil {
		b.Fatal("no link")
	}
	body := strings.Repeat("x", 1024)
	epoch := proto.NewID()
	var seq uint64
	for _, bc := range []struct {
		name    string
		to      proto.Destination
		watched bool // an event-stream reader renders every item
	}{
		{"channel", proto.ToChannel(p.ID), false},
		{"dm", proto.ToPeer(m.ids[1].Pub), false},
		{"channel_watched", proto.ToChannel(p.ID), true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.watched {
				stop := watchEvents(rd)
				defer stop()
			}
			frames := make([][]byte, b.N)
			for i := range frames {
				seq++
				se, err := proto.SignEnvelope(m.ids[0].Key, &proto.Envelope{
					ID: proto.NewID(), From: m.ids[0].Pub, To: bc.to, Kind: proto.KindMessage,
					TS: time.Now().UnixMilli(), TTL: 600, Seq: seq, Epoch: epoch,
					Message: &proto.Message{Body: body},
				})
				if err != nil {
					b.Fatal(err)
				}
				frames[i] = append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)
			}
			d0 := delivered()
			f0 := rd.metrics.Get("mirror.files")
			runtime.GC()
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for _, f := range frames {
				rd.handleFrame(pl, f)
			}
			want := d0 + int64(b.N)
			deadline := time.Now().Add(time.Minute)
			for delivered() < want || rd.metrics.Get("mirror.files") < f0+uint64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d delivered", delivered()-d0, b.N)
				}
				time.Sleep(time.Millisecond) // deliberate: a fine poll inside the timed section
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// watchEvents reads n's event stream as GET /v1/events does, rendering
// each item as JSON, until stop is called.
func watchEvents(n *Node) (stop func()) {
	items, _, cancel := n.q.SubscribeEvents()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case d := <-items:
				json.Marshal(d.Item())
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		cancel()
	}
}

// BenchmarkInboxRender measures the rendering of one delivered channel
// Message for its consumers, the mailbox item and the event stream's API
// item: the work that the readers, not the commit stage, now do per item.
//
//	go test -run='^$' -bench=InboxRender -benchmem ./node
func BenchmarkInboxRender(b *testing.B) {
	m, a, rd := linkedPair(b)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	waitFor(b, 10*time.Second, "policy", func() bool { _, ok := rd.chans.Set().ByName("bench"); return ok })
	se, err := proto.SignEnvelope(m.ids[0].Key, &proto.Envelope{
		ID: proto.NewID(), From: m.ids[0].Pub, To: proto.ToChannel(p.ID), Kind: proto.KindMessage,
		TS: time.Now().UnixMilli(), TTL: 600, Seq: 1, Epoch: proto.NewID(),
		Message: &proto.Message{Body: strings.Repeat("x", 1024)},
	})
	if err != nil {
		b.Fatal(err)
	}
	d := &inboxDelivery{n: rd, se: se, prio: history.PriorityNormal, wakes: true, at: time.Now()}
	b.Run("mailbox", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.MailboxItem()
		}
	})
	b.Run("event", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.Item()
		}
	})
}
