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
// The counters hit for every envelope are typed: an array of atomics
// indexed by [counter], so the receive and send paths take no lock to
// count. The rest, many of them named at run time ("drop."+reason), sit
// in a map behind a mutex. [Metrics.Inc] with a typed counter's name
// finds its atomic too, so the two kinds read and write alike.
type Metrics struct {
	typed [numCounters]atomic.Uint64
	// frameBytes counts the bytes of frames received, by frame type
	// (index 0: types this node does not know), for the control-traffic
	// figures: "rx.frame_bytes.<type>".
	frameBytes [16]atomic.Uint64

	mu sync.Mutex
	c  map[string]uint64 // guarded by mu: the counters that are not typed
}

// counter is a typed counter: one hit for (nearly) every envelope.
type counter int

// The typed counters. Their names are in counterNames.
const (
	cRxEnvelopes counter = iota
	cRxCommits
	cRxPresence
	cRxDeliveredMessage
	cRxDeliveredRequest
	cRxDeliveredResponse
	cRxDeliveredPresence
	cRxDeliveredHistoryRequest
	cRxDeliveredHistoryResponse
	cInboxItems
	cDropDuplicate
	cSyncAlreadyHeld
	cSyncEnvelopes
	cSyncPages
	cTxEnvelopes
	cTxMessage
	cTxQueued
	cTxAcked
	cTxPresence
	cMirrorFiles
	cMirrorBatches
	cRxPresenceBytes
	numCounters
)

// counterNames are the exported names of the typed counters.
var counterNames = [numCounters]string{
	cRxEnvelopes:                "rx.envelopes",
	cRxCommits:                  "rx.commits",
	cRxPresence:                 "rx.presence",
	cRxDeliveredMessage:         "rx.delivered." + proto.KindMessage.String(),
	cRxDeliveredRequest:         "rx.delivered." + proto.KindRequest.String(),
	cRxDeliveredResponse:        "rx.delivered." + proto.KindResponse.String(),
	cRxDeliveredPresence:        "rx.delivered." + proto.KindPresence.String(),
	cRxDeliveredHistoryRequest:  "rx.delivered." + proto.KindHistoryRequest.String(),
	cRxDeliveredHistoryResponse: "rx.delivered." + proto.KindHistoryResponse.String(),
	cInboxItems:                 "inbox.items",
	cDropDuplicate:              "drop." + dropDuplicate,
	cSyncAlreadyHeld:            "sync.already_held",
	cSyncEnvelopes:              "sync.envelopes",
	cSyncPages:                  "sync.pages",
	cTxEnvelopes:                "tx.envelopes",
	cTxMessage:                  "tx." + proto.KindMessage.String(),
	cTxQueued:                   "tx.queued",
	cTxAcked:                    "tx.acked",
	cTxPresence:                 "tx." + proto.KindPresence.String(),
	cMirrorFiles:                "mirror.files",
	cMirrorBatches:              "mirror.batches",
	cRxPresenceBytes:            "rx.presence_bytes",
}

// counterByName finds a typed counter by its name.
var counterByName = func() map[string]counter {
	m := make(map[string]counter, numCounters)
	for c, name := range counterNames {
		m[name] = counter(c)
	}
	return m
}()

func newMetrics() *Metrics { return &Metrics{c: map[string]uint64{}} }

// inc adds one to a typed counter.
func (m *Metrics) inc(c counter) { m.typed[c].Add(1) }

// add adds d to a typed counter.
func (m *Metrics) add(c counter, d uint64) { m.typed[c].Add(d) }

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
			out[counterNames[c]] = v
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
