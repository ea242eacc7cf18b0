package node

import (
	"sync"
	"testing"

	"github.com/meshd/meshd/node/outbound"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
)

// Typed counters and named ones read and write alike, by name or by
// index, and a snapshot holds exactly the counters that are not zero.
func TestMetricsTypedAndNamed(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	m.Inc("rx.envelopes")
	m.inc(rxCounters[rx.Received])
	m.Add("drop.bad_signature", 3)
	m.add(outboundCounters[outbound.Copies], 9)
	if got := m.Get("rx.envelopes"); got != 2 {
		t.Fatalf("rx.envelopes = %d, want 2", got)
	}
	if got := m.typed[rxCounters[rx.Received]].Load(); got != 2 {
		t.Fatalf("rx.envelopes by name did not reach the typed counter: %d", got)
	}
	want := map[string]uint64{"rx.envelopes": 2, "drop.bad_signature": 3, "tx.envelopes": 9}
	got := m.Snapshot()
	if len(got) != len(want) {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("snapshot %v, want %v", got, want)
		}
	}
	for c, d := range counterDefs {
		if d.Name == "" || d.Family == nil || len(d.Values) != len(d.Family.Labels) {
			t.Fatalf("counter %d is not well defined: %+v", c, d)
		}
	}
}

func TestMetricsConcurrent(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.inc(rxCounters[rx.Received])
				m.Inc("drop.expired")
				_ = m.Snapshot()
			}
		}()
	}
	wg.Wait()
	if m.Get("rx.envelopes") != 4000 || m.Get("drop.expired") != 4000 {
		t.Fatalf("counts %v", m.Snapshot())
	}
}

// BenchmarkMetricsInc counts one per-envelope counter from every core at
// once, as link readers, the commit stage and senders do.
func BenchmarkMetricsInc(b *testing.B) {
	m := newMetrics()
	b.Run("by-name", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Inc("rx.envelopes")
			}
		})
	})
	b.Run("typed", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.inc(rxCounters[rx.Received])
			}
		})
	})
}

// BenchmarkDropCount counts drops of a few reasons as the receive
// pipeline's drop does: one atomic add per drop, no string built.
func BenchmarkDropCount(b *testing.B) {
	m := newMetrics()
	reasons := [4]rx.Drop{rx.DropExpired, rx.DropBadSignature, rx.DropNotMember, rx.DropDuplicate}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.inc(cDrop.at(reasons[i&3]))
		i++
	}
}

// Every drop reason has a name and its own counter "drop.<name>": counting
// it by the vector reads back by name, in Get and in the snapshot.
func TestDropReasonsCountByName(t *testing.T) {
	t.Parallel()
	m := newMetrics()
	for r := rx.DropNone + 1; r < rx.NumDrops; r++ {
		name := r.String()
		if name == "" || name == "unknown" {
			t.Fatalf("drop reason %d has no name", r)
		}
		c := cDrop.at(r)
		if c < 0 || counterDefs[c].Name != "drop."+name || counterDefs[c].Family != famDropped {
			t.Fatalf("drop reason %s counts under %+v", name, counterDefs[c])
		}
		m.inc(c)
		m.Inc("drop." + name)
	}
	snap := m.Snapshot()
	if len(snap) != int(rx.NumDrops-1) {
		t.Fatalf("snapshot has %d counters, want %d: %v", len(snap), rx.NumDrops-1, snap)
	}
	for r := rx.DropNone + 1; r < rx.NumDrops; r++ {
		if got := snap["drop."+r.String()]; got != 2 {
			t.Errorf("drop.%s = %d, want 2", r, got)
		}
	}
}

// Defined counters have distinct names, and each is found by its name.
func TestCounterDefsByName(t *testing.T) {
	t.Parallel()
	for c, d := range counterDefs {
		if got, ok := counterByName[d.Name]; !ok || got != counter(c) {
			t.Errorf("%s: found as %d, %v; defined as %d", d.Name, got, ok, c)
		}
	}
	if len(counterByName) != len(counterDefs) {
		t.Errorf("%d names for %d counters", len(counterByName), len(counterDefs))
	}
}

// The indexed vectors name their counters as the strings they replace:
// "presence.changed.<state>", "tx.<kind>", "send.dropped.<frame>",
// "sync.refused.<status>", "link.down.<why>".
func TestCounterVectorsKeepTheirNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		c    counter
		name string
	}{
		{cPresenceChanged.of(proto.Away), "presence.changed.away"},
		{cPresenceChanged.of(proto.Offline), "presence.changed.offline"},
		{cTxKind.of(proto.KindRequest), "tx.request"},
		{cRxDelivered.of(proto.KindHistoryResponse), "rx.delivered.history-response"},
		{cSendDropped.of(proto.FramePresenceNote), "send.dropped.presence-note"},
		{cSyncRefused.c[proto.HistoryDenied], "sync.refused.denied"},
		{cLinkDownBy.at(linkDownSlowReader), "link.down.slow_reader"},
	} {
		if c.c < 0 || counterDefs[c.c].Name != c.name {
			t.Errorf("counter %d is not %s", c.c, c.name)
		}
	}
	for _, c := range []counter{cPresenceChanged.of(proto.PresenceState(9)), cTxKind.of(proto.Kind(99)), cSendDropped.of(proto.FrameType(200))} {
		if c != -1 {
			t.Errorf("an unknown value has counter %d", c)
		}
	}
	m := newMetrics()
	m.inc(-1) // counts nothing, and does not panic
	if len(m.Snapshot()) != 0 {
		t.Fatalf("snapshot %v", m.Snapshot())
	}
}
