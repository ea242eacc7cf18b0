//go:build linux

package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// TestAttachmentEnvelopeLatency measures, on one link between two real
// meshd processes on loopback, how long a short DM takes from alice's
// send (POST /v1/send) to its event on bob's event stream: idle, then
// while a 256 MiB attachment moves over the same link, in the same run
// (the nodes' attachment limits raised to 256 MiB, as in
// TestAttachmentThroughput, so that the transfer lasts for enough probes),
// and fails if the median during the transfer is over twice the idle one
// (issue 31's figure). It runs only with MESHD_BENCH_ATTACH=1 (MESHD_BENCH_ARGS adds meshd
// flags); docs/BENCHMARKS.md has the figures.
func TestAttachmentEnvelopeLatency(t *testing.T) {
	if os.Getenv("MESHD_BENCH_ATTACH") != "1" {
		t.Skip("set MESHD_BENCH_ATTACH=1 to measure")
	}
	args := append([]string{"--attachment-max-mib", "256", "--attachment-eager-max-mib", "256"},
		strings.Fields(os.Getenv("MESHD_BENCH_ARGS"))...)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, args...)
	file, _ := randomFile(t, meshTempDir(t), "data.bin", 256<<20, 11)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	es, err := m.client(1).OpenEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	events := make(chan api.Item, 64)
	go func() {
		defer close(events)
		for {
			ev, err := es.Next()
			if err != nil {
				return
			}
			if !ev.Lagged {
				events <- ev.Item
			}
		}
	}()
	var bigID string
	probe := func() time.Duration {
		start := time.Now()
		sent, err := m.client(0).Send(ctx, api.Send{To: "bob", Body: "ping"})
		if err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case it, ok := <-events:
				if !ok {
					t.Fatal("bob's event stream ended")
				}
				if it.ID == sent.ID {
					return time.Since(start)
				}
				if len(it.Attachments) > 0 {
					bigID = it.ID
				}
			case <-ctx.Done():
				t.Fatal("a probe DM did not arrive")
			}
		}
	}
	probe() // the link and the stream warm up
	var idle, busy []time.Duration
	for range 100 {
		idle = append(idle, probe())
	}
	go func() {
		_, _ = m.client(0).Send(ctx, api.Send{To: "bob", Body: "256 MiB", Attachments: []string{file}})
	}()
	for bigID == "" {
		probe()
	}
	for ctx.Err() == nil {
		d := probe()
		if m.attachmentPresent(ctx, bigID) {
			break // this probe may have followed the transfer's end
		}
		busy = append(busy, d)
	}
	if len(busy) < 10 {
		t.Fatalf("only %d probes during the transfer", len(busy))
	}
	ip50, ip99 := percentiles(idle)
	bp50, bp99 := percentiles(busy)
	t.Logf("idle: %d probes, p50 %v, p99 %v", len(idle), ip50, ip99)
	t.Logf("during the transfer: %d probes, p50 %v (%.2fx idle), p99 %v (%.2fx idle)",
		len(busy), bp50, bp50.Seconds()/ip50.Seconds(), bp99, bp99.Seconds()/ip99.Seconds())
	t.Logf("load average: %s", loadAvg())
	if r := bp50.Seconds() / ip50.Seconds(); r > 2 {
		t.Errorf("median envelope latency during the transfer is %.2fx idle: issue 31 wants at most 2x", r)
	}
}

// attachmentPresent reports whether bob's inbox names the path of the
// attachment of item id.
func (m *faultMesh) attachmentPresent(ctx context.Context, id string) bool {
	in, err := m.client(1).Inbox(ctx, api.InboxQuery{All: true})
	if err != nil {
		return false
	}
	for _, it := range in.Items {
		if it.ID == id {
			return len(it.Attachments) == 1 && it.Attachments[0].Path != ""
		}
	}
	return false
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
