package node

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/meshd/meshd/proto"
)

// Metrics counts what the node does and, above all, what it drops and why.
// Names are dotted ("drop.bad_signature", "handshake.rejected"). A counter
// that was never incremented is absent, not zero.
//
// The counters defined with [newCounter] (see metricdef.go) each have an
// atomic here, indexed by [counter], so counting one takes no lock and
// builds no string. The rest, many of them named at run time, sit in a
// map behind a mutex until they are defined too. [Metrics.Inc] with a
// defined counter's name finds its atomic, so the two kinds read and
// write alike.
type Metrics struct {
	typed []atomic.Uint64 // by counter; as many as counterDefs
	// frameBytes counts the bytes of frames received, by frame type
	// (index 0: types this node does not know), for the control-traffic
	// figures: "rx.frame_bytes.<type>".
	frameBytes [16]atomic.Uint64

	mu sync.Mutex
	c  map[string]uint64 // guarded by mu: the counters that are not defined
}

// newMetrics runs after package init, so every counter is defined.
func newMetrics() *Metrics {
	return &Metrics{typed: make([]atomic.Uint64, len(counterDefs)), c: map[string]uint64{}}
}

// inc adds one to a defined counter; -1 (no counter) counts nothing.
func (m *Metrics) inc(c counter) { m.add(c, 1) }

// add adds d to a defined counter; -1 (no counter) counts nothing.
func (m *Metrics) add(c counter, d uint64) {
	if c >= 0 {
		m.typed[c].Add(d)
	}
}

// frameIn counts a received frame of n bytes and type t.
func (m *Metrics) frameIn(t proto.FrameType, n int) {
	i := int(t)
	if i >= len(m.frameBytes) {
		i = 0
	}
	m.frameBytes[i].Add(uint64(n))
}

// Inc adds one to the named counter.
func (m *Metrics) Inc(name string) { m.Add(name, 1) }

// Add adds d to the named counter.
func (m *Metrics) Add(name string, d uint64) {
	if c, ok := counterByName[name]; ok {
		m.typed[c].Add(d)
		return
	}
	m.mu.Lock()
	m.c[name] += d
	m.mu.Unlock()
}

// Get returns the named counter.
func (m *Metrics) Get(name string) uint64 {
	if c, ok := counterByName[name]; ok {
		return m.typed[c].Load()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c[name]
}

// Snapshot returns a copy of every counter that is not zero.
func (m *Metrics) Snapshot() map[string]uint64 {
	m.mu.Lock()
	out := maps.Clone(m.c)
	m.mu.Unlock()
	for c := range m.typed {
		if v := m.typed[c].Load(); v > 0 {
			out[counterDefs[c].Name] = v
		}
	}
	for t := range m.frameBytes {
		if v := m.frameBytes[t].Load(); v > 0 {
			name := "unknown"
			if t > 0 {
				name = proto.FrameType(t).String()
			}
			out["rx.frame_bytes."+name] += v
		}
	}
	return out
}
