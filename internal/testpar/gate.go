package testpar

import (
	"flag"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The gate orders a package's parallel tests, where go test does not:
// it releases the paused tests in an order of the runtime's making, so
// the tests that wait longest on the protocol's timers (a presence hold,
// a dial backoff, a partition's idle timeout) could start last and leave
// the machine idle while they waited alone. In cmd/meshd they started
// 28-31 s into a 35 s parallel phase that kept both CPUs busy, and the
// package then ran 16 s more at 12-18% CPU (docs/BENCHMARKS.md).
//
// [Gated] hands the limit to the gate; each test then calls [Parallel],
// or [First] if it is long: once every test of the package has paused
// (which go test guarantees happens before it releases any of them),
// the gate gives its places to the First tests, at most half of them at
// once so that they do not leave the CPU idle, and to the others in the
// order they are written.

// firstShare is the part of the gate's places the First tests may hold
// together while other tests wait: half, so that under the race
// detector's four places two go to tests that load the CPU.
const firstShare = 2

var theGate *gate

// Gated sets the gate's places to -test.parallel if the command line
// set it, else to [Want], and raises -test.parallel past any count of
// tests, so that go test releases them all and the gate alone limits
// them. Call it from TestMain before m.Run, instead of [Default]. It
// returns the gate's places.
func Gated() int {
	n := Default()
	if n <= 0 {
		n = Want()
	}
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set(strconv.Itoa(1 << 20))
	}
	theGate = newGate(n)
	return n
}

// Parallel marks t as a parallel test that the gate admits in its turn,
// or calls t.Parallel alone if the package did not call [Gated]. Call it
// where t.Parallel would go, from a top-level test.
func Parallel(t *testing.T) { parallel(t, classRest) }

// First is [Parallel] for a test that takes long and mostly waits: the
// gate admits it before the tests that call Parallel.
func First(t *testing.T) { parallel(t, classFirst) }

func parallel(t *testing.T, class int) {
	g := theGate
	if g == nil || strings.Contains(t.Name(), "/") { // a subtest would wait on its parent's place
		t.Parallel()
		return
	}
	g.register()
	t.Parallel()
	<-g.arrive(class)
	t.Cleanup(func() { g.release(class) }) // the test's own cleanups run before it
}

const (
	classFirst = iota
	classRest
)

type gate struct {
	mu         sync.Mutex
	places     int
	free       int
	firstMax   int // how many First tests may run while others wait
	firstIn    int // First tests holding a place
	registered int // tests that called Parallel
	arrived    int // of those, how many go test released
	open       bool
	queue      [2][]chan struct{}
}

func newGate(places int) *gate {
	places = max(places, 1)
	return &gate{places: places, free: places, firstMax: max(places/firstShare, 1)}
}

// register counts a test before it pauses in t.Parallel. Every top-level
// test registers before go test releases any of them.
func (g *gate) register() {
	g.mu.Lock()
	g.registered++
	g.mu.Unlock()
}

// arrive queues a released test; the channel is closed when it may run.
func (g *gate) arrive(class int) <-chan struct{} {
	ch := make(chan struct{})
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrived++
	g.queue[class] = append(g.queue[class], ch)
	g.grantLocked()
	return ch
}

// release gives back the place of a test that ended.
func (g *gate) release(class int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free++
	if class == classFirst {
		g.firstIn--
	}
	if g.free == g.places && g.arrived == g.registered {
		g.open = false // the round is over: -test.count's next waits for all its tests again
		return
	}
	g.grantLocked()
}

// grantLocked hands out free places once every registered test is
// queued: to First tests while fewer than firstMax of them run, then to
// the rest in order, then to First tests past firstMax if no other test
// waits.
func (g *gate) grantLocked() {
	if !g.open {
		if g.arrived < g.registered {
			return
		}
		g.open = true
	}
	for g.free > 0 {
		class := classRest
		switch {
		case len(g.queue[classFirst]) > 0 && (g.firstIn < g.firstMax || len(g.queue[classRest]) == 0):
			class = classFirst
		case len(g.queue[classRest]) == 0:
			return
		}
		ch := g.queue[class][0]
		g.queue[class] = g.queue[class][1:]
		g.free--
		if class == classFirst {
			g.firstIn++
		}
		close(ch)
	}
}
