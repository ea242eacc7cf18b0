// Package gcfloor keeps the garbage collector's heap goal at or above a
// floor while a process allocates fast. A node's live heap is small (2-4
// MB for a channel reader under load, docs/BENCHMARKS.md), so at the
// runtime's default (GOGC=100, a goal of twice the live heap, at least 4
// MB) a node receiving a few hundred envelopes a second collects 15 times
// a second, and what each cycle costs whatever the heap's size (stacks,
// globals, the pauses, the write barrier while it marks) becomes a tenth
// of its CPU. While the process allocates fast (8 MiB a second or more),
// the floor raises GOGC so that the goal is the floor; once it allocates
// less than 2 MiB a second, or its live heap is half the floor or more,
// GOGC is 100 again. An idle node keeps the default's small heap, and a
// busy one grows by at most the floor, never in proportion to its heap.
//
// After each collection (a cleanup on an object allocated for it, so
// nothing polls) the floor reads the live heap and the bytes allocated
// since the last collection, and sets GOGC.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultBytes is the floor meshd sets: 16 MiB.
const DefaultBytes = 16 << 20

// The floor holds from a collection that finds the process allocated
// busyRate a second or more since the one before (at the default, two
// collections a second or more for a small heap) until one finds it
// allocated less than idleRate.
const (
	busyRate = 8 << 20
	idleRate = 2 << 20
)

// quietAfter ends the floor when no collection came for that long while
// it held: the process has slowed down, and at the floor's goal the next
// collection could be minutes away, with the heap held at the floor
// meanwhile. The timer exists only while the floor holds.
const quietAfter = 5 * time.Second

// minHeap is the runtime's least heap goal at GOGC=100, which it scales
// with GOGC: at 400 a goal is never under 16 MiB, whatever the live heap.
const minHeap = 4 << 20

// Floor is a running floor, from [Start].
type Floor struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	busy    bool // allocating fast: the floor holds
	percent int  // what the floor last set
	tunes   int  // how many collections it has seen
	allocs  uint64
	at      time.Time

	quietAfter time.Duration // quietAfter, or shorter in a test
	quietTimer *time.Timer   // while busy: ends the floor if no collection comes
}

// sentinel is allocated for one collection to find unreachable; it holds
// a pointer so that it is not packed with other objects by the tiny
// allocator, where it could outlive the cycle.
type sentinel struct {
	_ *Floor
	_ [16]byte
}

// Start sets the floor to floor bytes until Stop.
func Start(floor uint64) *Floor {
	f := &Floor{floor: floor, percent: 100, at: time.Now(), quietAfter: quietAfter}
	f.allocs, _ = readHeap()
	f.tune()
	return f
}

// Stop puts GOGC back to 100 and ends the floor. It is idempotent.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	if f.quietTimer != nil {
		f.quietTimer.Stop()
	}
	if f.percent != 100 {
		debug.SetGCPercent(100)
		f.percent = 100
	}
}

// state is the GOGC the floor last set, whether the process allocated
// fast at the last collection, and how many collections it has seen.
func (f *Floor) state() (percent int, busy bool, collections int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.percent, f.busy, f.tunes
}

// tune sets GOGC for the live heap now and arms the next collection's.
func (f *Floor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	allocs, live := readHeap()
	now := time.Now()
	if secs := now.Sub(f.at).Seconds(); secs > 0 {
		rate := float64(allocs-f.allocs) / secs
		switch {
		case rate >= busyRate:
			f.busy = true
		case rate < idleRate:
			f.busy = false
		}
	}
	f.allocs, f.at = allocs, now
	p := 100
	if f.busy {
		p = percentFor(f.floor, live)
	}
	// A change under a tenth is not worth the runtime's recomputation,
	// unless it is back to the default.
	if d := p - f.percent; d != 0 && (p == 100 || d*10 > f.percent || -d*10 > f.percent) {
		debug.SetGCPercent(p)
		f.percent = p
	}
	switch {
	case f.busy && f.quietTimer == nil:
		f.quietTimer = time.AfterFunc(f.quietAfter, f.quiet)
	case f.busy:
		f.quietTimer.Reset(f.quietAfter)
	case f.quietTimer != nil:
		f.quietTimer.Stop()
	}
	f.tunes++
	runtime.AddCleanup(&sentinel{}, func(f *Floor) { f.tune() }, f)
}

// quiet ends the floor after quietAfter without a collection. The heap
// is then over the default's goal, so a collection follows at once, and
// its tune measures how fast the process allocated meanwhile.
func (f *Floor) quiet() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped || !f.busy {
		return
	}
	f.busy = false
	if f.percent != 100 {
		debug.SetGCPercent(100)
		f.percent = 100
	}
}

// percentFor is the GOGC that makes the goal the floor for a live heap
// of live bytes: 100 × (floor/live − 1), but no more than makes the
// runtime's scaled least goal the floor (100 × floor/minHeap), and at
// least 100.
func percentFor(floor, live uint64) int {
	if live*2 >= floor {
		return 100
	}
	p := 100 * floor / minHeap
	if live > 0 {
		p = min(p, 100*(floor-live)/live)
	}
	return int(max(p, 100))
}

// readHeap returns the bytes allocated since the process started and
// the heap the last collection marked live.
func readHeap() (allocs, live uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		allocs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		live = s[1].Value.Uint64()
	}
	return allocs, live
}
