package promexport

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/status"
	"github.com/meshd/meshd/roster"
)

// Source is what a [Collector] reads at scrape time. [node.Backend]
// implements it; tests use a fake.
type Source interface {
	// Counters returns the dotted counters, absent meaning zero.
	Counters() map[string]uint64
	LinkCounts() map[status.LinkClass]int
	QueueDepths() []status.QueueDepth
	PresenceCounts() map[string]int
	HistoryStats() (history.Stats, error)
	Roster() *roster.Roster
	Started() time.Time
}

var _ Source = node.Backend{}

// Collector is a [prometheus.Collector] that reads a [Source] at each
// scrape and maps its dotted counters to metric families with the table
// in the package doc. It keeps no state of its own, so the node's
// counters stay the single source of truth.
type Collector struct {
	src Source
	m   *mapper
}

// NewCollector returns a collector for src.
func NewCollector(src Source) *Collector {
	return &Collector{src: src, m: newMapper(allRules())}
}

// Describe sends the descriptor of every family the collector can emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range allFamilies() {
		ch <- f.desc
	}
}

// Collect reads the source and sends one metric per series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.collectCounters(ch)
	c.collectGauges(ch)
}

// series is one labelled value being summed for a scrape.
type series struct {
	fam    *family
	values []string
	v      float64
}

// seriesSet sums values per family and label values: two dotted names
// may map to the same series (say "peers.malformed" and a future
// "peers.ignored.malformed"), and the registry refuses duplicates.
type seriesSet struct {
	m     map[string]*series
	order []*series
}

func newSeriesSet() *seriesSet { return &seriesSet{m: map[string]*series{}} }

func (s *seriesSet) add(f *family, values []string, v float64) {
	key := f.desc.String() + "\xff" + strings.Join(values, "\xff")
	if e := s.m[key]; e != nil {
		e.v += v
		return
	}
	e := &series{fam: f, values: values, v: v}
	s.m[key] = e
	s.order = append(s.order, e)
}

func (s *seriesSet) emit(ch chan<- prometheus.Metric) {
	for _, e := range s.order {
		ch <- prometheus.MustNewConstMetric(e.fam.desc, e.fam.typ, e.v, e.values...)
	}
}

func (c *Collector) collectCounters(ch chan<- prometheus.Metric) {
	set := newSeriesSet()
	// Exact names are exported from the start, at zero, so a rate over
	// them works before the first event; prefixed ones appear as their
	// label values do.
	for _, r := range allRules() {
		if !strings.HasSuffix(r.name, ".") {
			set.add(r.fam, r.values, 0)
		}
	}
	for name, v := range c.src.Counters() {
		f, values := c.m.resolve(name)
		set.add(f, values, float64(v))
	}
	set.emit(ch)
}

// Link networks and directions always exported, at zero when unused.
var (
	linkNetworks   = []string{"tcp", "unix"}
	linkDirections = []string{"inbound", "outbound"}
)

func (c *Collector) collectGauges(ch chan<- prometheus.Metric) {
	set := newSeriesSet()
	for _, n := range linkNetworks {
		for _, d := range linkDirections {
			set.add(famLinks, []string{n, d}, 0)
		}
	}
	for cl, k := range c.src.LinkCounts() {
		set.add(famLinks, []string{cl.Network, cl.Direction}, float64(k))
	}
	for _, q := range c.src.QueueDepths() {
		set.add(famQueueLen, []string{q.Name}, float64(q.Len))
		set.add(famQueueCap, []string{q.Name}, float64(q.Cap))
	}
	for _, s := range status.PresenceStates() {
		set.add(famPresence, []string{s}, 0)
	}
	for s, k := range c.src.PresenceCounts() {
		set.add(famPresence, []string{s}, float64(k))
	}
	if r := c.src.Roster(); r != nil {
		set.add(famRosterVersion, nil, float64(r.Version))
		set.add(famRosterMembers, nil, float64(len(r.Members)))
	}
	set.add(famUptime, nil, time.Since(c.src.Started()).Seconds())
	set.emit(ch)

	st, err := c.src.HistoryStats()
	if err != nil {
		// The handler serves the rest and logs this.
		ch <- prometheus.NewInvalidMetric(famHistoryBytes.desc, fmt.Errorf("history stats: %w", err))
		return
	}
	queued := 0
	for _, k := range st.Queues {
		queued += k
	}
	ch <- prometheus.MustNewConstMetric(famHistoryBytes.desc, famHistoryBytes.typ, float64(st.FileSize))
	ch <- prometheus.MustNewConstMetric(famHistoryEnvs.desc, famHistoryEnvs.typ, float64(st.Envelopes))
	ch <- prometheus.MustNewConstMetric(famHistoryQueued.desc, famHistoryQueued.typ, float64(queued))
}

// NewRegistry returns a private registry (never the global default one)
// holding a [Collector] for src plus the process and Go runtime
// collectors.
func NewRegistry(src Source) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		NewCollector(src),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register collector: %w", err)
		}
	}
	return reg, nil
}
