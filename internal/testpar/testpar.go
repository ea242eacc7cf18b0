// Package testpar sets how many tests of a package run at once when the
// command line does not say. The real-process tests of cmd/, and node's
// in-process meshes, spend most of their time waiting on daemons (timers,
// links forming, a store's fsync), not on the CPU, so the go test default of GOMAXPROCS parallel tests
// leaves a 2-core machine mostly idle. The tests that load the CPU or hold
// timing bounds do not call t.Parallel: go test runs those alone, before
// the parallel ones start. A package may also hand the limit to a gate
// ([Gated]) that starts its long, mostly waiting tests first ([First]).
// It imports nothing from the project.
package testpar

import (
	"flag"
	"runtime"
	"strconv"
)

// PerCPU is how many parallel tests Default allows per CPU. At two per
// CPU, a cmd/meshd run on 2 cores used 168 s of CPU in 627 s: its
// parallel phase ran four at a time, each mostly waiting on daemons'
// timers, for 930 s of tests in 246 s. At four, a run used one core on
// average (172 s of CPU in 175 s), and its parallel phase (92 s) ended
// with tests that had waited half a minute for a place and then waited
// out the protocol's clock allowance; at six, 52 s.
const PerCPU = 6

// Min is the least Default allows, so a 1- or 2-core machine still
// overlaps the waits of several tests.
const Min = 12

// Default sets -test.parallel to max(Min, PerCPU*GOMAXPROCS) unless the
// command line set it. Call it from TestMain before m.Run; it parses the
// flags itself. It returns the value in force.
func Default() int {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 0
	}
	set := false
	flag.Visit(func(v *flag.Flag) { set = set || v.Name == "test.parallel" })
	if !set {
		_ = f.Value.Set(strconv.Itoa(Want()))
	}
	n, _ := strconv.Atoi(f.Value.String())
	return n
}

// Want is the value Default sets: max(Min, PerCPU*GOMAXPROCS), a third
// of it under the race detector, which multiplies each daemon's CPU
// several times over, so that the waits the tests bound stay on a
// loaded 2-core machine what they were when four ran at once.
func Want() int {
	n := max(Min, PerCPU*runtime.GOMAXPROCS(0))
	if raceEnabled {
		n /= 3
	}
	return n
}

// Race reports whether the race detector is built in: a test that counts
// allocations skips under it, since its sync.Pool drops what it is handed
// at random.
const Race = raceEnabled
