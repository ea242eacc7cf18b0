// Package testwait is how tests wait for something to happen: they poll
// a condition with a deadline, so that a test is as fast as the code it
// tests and fails naming what never happened, never sleeping for a
// guessed time. It imports nothing from the project.
package testwait

import (
	"testing"
	"time"
)

// MaxPoll is the longest pause between two checks of a cheap condition.
// The first check after the first comes after 1 ms and the pauses double
// up to MaxPoll: a condition that holds soon is seen soon.
const MaxPoll = 50 * time.Millisecond

// CostFactor bounds what checking costs: once the pauses have grown, the
// pause after a check is at least CostFactor times as long as the check
// took. A condition that runs a command (a meshctl process, about 12 ms
// of CPU and more under load) is then checked a few times a second
// rather than twenty, so a test waiting on one does not take a quarter
// of a core from the daemons it waits on, and on a loaded machine the
// checks slow down with it.
const CostFactor = 4

// Until checks cond until it holds, and reports whether it did within d.
// cond is checked at least once, also when d is not positive.
func Until(d time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	pause := time.Millisecond
	next := time.NewTimer(pause)
	defer next.Stop()
	for {
		select {
		case <-next.C:
			start := time.Now()
			if cond() {
				return true
			}
			pause = nextPause(pause, time.Since(start))
			next.Reset(pause)
		case <-deadline.C:
			return cond()
		}
	}
}

// nextPause is the pause after a check that took cost, following one of
// pause: double, up to MaxPoll, and then no less than CostFactor*cost,
// nor more than a second so that a slow check still ends a wait soon.
func nextPause(pause, cost time.Duration) time.Duration {
	pause = min(2*pause, MaxPoll)
	if pause == MaxPoll {
		pause = max(pause, min(CostFactor*cost, time.Second))
	}
	return pause
}

// For waits up to d for cond to hold, and fails the test now, saying
// what it waited for, if it does not.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
