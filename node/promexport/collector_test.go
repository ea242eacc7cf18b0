package promexport_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/promexport"
	"github.com/meshd/meshd/node/status"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeSource is a [promexport.Source] with fixed answers.
type fakeSource struct {
	counters map[string]uint64
	links    map[status.LinkClass]int
	queues   []status.QueueDepth
	presence map[string]int
	hist     history.Stats
	histErr  error
	roster   *roster.Roster
	started  time.Time
}

func (f *fakeSource) Counters() map[string]uint64          { return f.counters }
func (f *fakeSource) LinkCounts() map[status.LinkClass]int { return f.links }
func (f *fakeSource) QueueDepths() []status.QueueDepth     { return f.queues }
func (f *fakeSource) PresenceCounts() map[string]int       { return f.presence }
func (f *fakeSource) HistoryStats() (history.Stats, error) { return f.hist, f.histErr }
func (f *fakeSource) Roster() *roster.Roster               { return f.roster }
func (f *fakeSource) Started() time.Time                   { return f.started }

func newFake(t *testing.T) *fakeSource {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := roster.New("acme", key, "a")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeSource{
		counters: map[string]uint64{
			"rx.envelopes":              9,
			"rx.delivered.message":      3,
			"rx.presence":               2,
			"drop.bad_signature":        1,
			"drop.duplicate":            2,
			"tx.message":                4,
			"tx.envelopes":              5,
			"tx.dropped.queue":          1,
			"tx.refused.hop_limit":      1,
			"handshake.accepted":        6,
			"handshake.failed":          2,
			"handshake.rejected.self":   1,
			"link.up":                   2,
			"peers.malformed":           1,
			"peers.ignored.malformed":   2, // lands on the same series: summed
			"mirror.disk_full":          1,
			"sync.rounds":               7,
			"sync.envelopes":            70,
			"sync.refused.denied":       1,
			"history.served.envelopes":  8,
			"outbox.failed.send":        1,
			"retention.expired.queued":  3,
			"brand.new.counter":         4,
			"tx.someday":                1, // not an envelope kind
			"drop.":                     1, // empty rest
			"rx.delivered.message.part": 1, // dotted rest
		},
		links: map[status.LinkClass]int{
			{Network: "tcp", Direction: "inbound"}:   2,
			{Network: "unix", Direction: "outbound"}: 1,
			{Network: "pipe", Direction: "inbound"}:  1,
		},
		queues:   []status.QueueDepth{{Name: status.QueueRxCommit, Len: 3, Cap: 1024}, {Name: status.QueueMirror, Len: 0, Cap: 256}},
		presence: map[string]int{"online": 2, "offline": 1},
		hist:     history.Stats{FileSize: 65536, Envelopes: 12, Queues: map[proto.PubKey]int{{1}: 2, {2}: 3}},
		roster:   r,
		started:  time.Now().Add(-time.Minute),
	}
}

func scrapeHandler(t *testing.T, src promexport.Source) exposition {
	t.Helper()
	reg, err := promexport.NewRegistry(src)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promexport.Handler(reg, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	e, err := parseText(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCollectorMapsCounters(t *testing.T) {
	e := scrapeHandler(t, newFake(t))
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"meshd_envelopes_received_total", nil, 9},
		{"meshd_envelopes_delivered_total", l("kind", "message"), 3},
		{"meshd_envelopes_delivered_total", l("kind", "presence"), 2},
		{"meshd_envelopes_dropped_total", l("reason", "bad_signature"), 1},
		{"meshd_envelopes_dropped_total", l("reason", "duplicate"), 2},
		{"meshd_envelopes_sent_total", l("kind", "message"), 4},
		{"meshd_envelope_copies_sent_total", nil, 5},
		{"meshd_envelopes_send_dropped_total", l("reason", "queue"), 1},
		{"meshd_sends_refused_total", l("reason", "hop_limit"), 1},
		{"meshd_handshakes_total", l("result", "accepted"), 6},
		{"meshd_handshakes_total", l("result", "failed"), 2},
		{"meshd_handshakes_rejected_total", l("reason", "self"), 1},
		{"meshd_link_events_total", l("event", "up"), 2},
		{"meshd_link_events_total", l("event", "down"), 0}, // exact rows start at zero
		{"meshd_peer_exchange_ignored_total", l("reason", "malformed"), 3},
		{"meshd_mirror_failures_total", l("reason", "disk_full"), 1},
		{"meshd_mirror_failures_total", l("reason", "error"), 0},
		{"meshd_mirror_files_written_total", nil, 0},
		{"meshd_sync_rounds_total", nil, 7},
		{"meshd_sync_envelopes_received_total", nil, 70},
		{"meshd_sync_refused_total", l("status", "denied"), 1},
		{"meshd_history_served_envelopes_total", nil, 8},
		{"meshd_history_requests_served_total", nil, 0},
		{"meshd_outbox_failures_total", l("reason", "send"), 1},
		{"meshd_retention_pruned_total", l("what", "queued"), 3},
		{"meshd_events_total", l("name", "brand.new.counter"), 4},
		{"meshd_events_total", l("name", "tx.someday"), 1},
		{"meshd_events_total", l("name", "drop."), 1},
		{"meshd_events_total", l("name", "rx.delivered.message.part"), 1},
	} {
		got, ok := e.value(c.name, c.labels)
		if !ok {
			t.Errorf("%s%v missing; have %v", c.name, c.labels, e.describe(c.name))
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := e.value("meshd_envelopes_sent_total", l("kind", "someday")); ok {
		t.Error(`"tx.someday" was taken for an envelope kind`)
	}
}

func TestCollectorGauges(t *testing.T) {
	f := newFake(t)
	e := scrapeHandler(t, f)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"meshd_links", l("network", "tcp", "direction", "inbound"), 2},
		{"meshd_links", l("network", "tcp", "direction", "outbound"), 0},
		{"meshd_links", l("network", "unix", "direction", "outbound"), 1},
		{"meshd_links", l("network", "unix", "direction", "inbound"), 0},
		{"meshd_links", l("network", "pipe", "direction", "inbound"), 1},
		{"meshd_queue_length", l("queue", "rx_commit"), 3},
		{"meshd_queue_capacity", l("queue", "rx_commit"), 1024},
		{"meshd_queue_length", l("queue", "mirror"), 0},
		{"meshd_queue_capacity", l("queue", "mirror"), 256},
		{"meshd_presence_members", l("state", "online"), 2},
		{"meshd_presence_members", l("state", "away"), 0},
		{"meshd_presence_members", l("state", "offline"), 1},
		{"meshd_history_db_bytes", nil, 65536},
		{"meshd_history_envelopes", nil, 12},
		{"meshd_history_queued_envelopes", nil, 5},
		{"meshd_roster_version", nil, float64(f.roster.Version)},
		{"meshd_roster_members", nil, 1},
	} {
		if got := e.must(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if up := e.must(t, "meshd_uptime_seconds", nil); up < 59 || up > 3600 {
		t.Errorf("uptime %g, want about 60", up)
	}
	// The process and Go collectors are registered in the private registry.
	for _, name := range []string{"process_start_time_seconds", "go_goroutines"} {
		if len(e[name]) == 0 {
			t.Errorf("%s missing", name)
		}
	}
}

// A failing history store costs only the history gauges, not the scrape.
func TestCollectorHistoryErrorKeepsTheRest(t *testing.T) {
	f := newFake(t)
	f.histErr = errors.New("database not open")
	e := scrapeHandler(t, f)
	if _, ok := e.value("meshd_history_db_bytes", nil); ok {
		t.Error("history gauge exported despite the error")
	}
	if got := e.must(t, "meshd_envelopes_dropped_total", l("reason", "bad_signature")); got != 1 {
		t.Errorf("drops = %g, want 1", got)
	}
}

func TestCollectorLint(t *testing.T) {
	reg, err := promexport.NewRegistry(newFake(t))
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "meshd_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// The registry is private: nothing lands in the global default one.
func TestNoGlobalRegistration(t *testing.T) {
	if _, err := promexport.NewRegistry(newFake(t)); err != nil {
		t.Fatal(err)
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "meshd_") {
			t.Fatalf("%s is in the default registry", mf.GetName())
		}
	}
}

// Every counter the node defines is exported under the family and label
// values of its definition, with the node's value.
func TestCollectorExportsEveryRegisteredCounter(t *testing.T) {
	defs := node.RegisteredCounters()
	if len(defs) == 0 {
		t.Fatal("the node defines no counter")
	}
	f := newFake(t)
	f.counters = map[string]uint64{}
	type key struct{ fam, labels string }
	want := map[key]float64{}
	labelsOf := func(d node.CounterDef) map[string]string {
		m := map[string]string{}
		for i, name := range d.Family.Labels {
			m[name] = d.Values[i]
		}
		return m
	}
	for i, d := range defs {
		f.counters[d.Name] = uint64(i + 1)
		// Two names may share a series (rx.presence and
		// rx.delivered.presence): the export sums them.
		want[key{d.Family.Name, fmt.Sprint(labelsOf(d))}] += float64(i + 1)
	}
	e := scrapeHandler(t, f)
	for _, d := range defs {
		got, ok := e.value(d.Family.Name, labelsOf(d))
		if !ok {
			t.Errorf("%s: no %s%v in the export", d.Name, d.Family.Name, labelsOf(d))
			continue
		}
		if w := want[key{d.Family.Name, fmt.Sprint(labelsOf(d))}]; got != w {
			t.Errorf("%s: %s%v = %g, want %g", d.Name, d.Family.Name, labelsOf(d), got, w)
		}
	}
}
