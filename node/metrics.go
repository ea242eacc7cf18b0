package node

import (
	"maps"
	"sync"
)

// Metrics counts what the node does and, above all, what it drops and why.
// Names are dotted ("drop.bad_signature", "handshake.rejected"). A counter
// that was never incremented is absent, not zero.
type Metrics struct {
	mu sync.Mutex
	c  map[string]uint64 // guarded by mu
}

func newMetrics() *Metrics { return &Metrics{c: map[string]uint64{}} }

// Inc adds one to the named counter.
func (m *Metrics) Inc(name string) { m.Add(name, 1) }

// Add adds d to the named counter.
func (m *Metrics) Add(name string, d uint64) {
	m.mu.Lock()
	m.c[name] += d
	m.mu.Unlock()
}

// Get returns the named counter.
func (m *Metrics) Get(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c[name]
}

// Snapshot returns a copy of every counter.
func (m *Metrics) Snapshot() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.c)
}
