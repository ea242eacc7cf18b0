// Package testwait is how tests wait for something to happen: they poll
// a condition with a deadline, so that a test is as fast as the code it
// tests and fails naming what never happened, never sleeping for a
// guessed time. It imports nothing from the project.
package testwait

import (
	"testing"
	"time"
)

// MaxPoll is the longest pause between two checks of a condition. The
// first check after the first comes after 1 ms and the pauses double up
// to MaxPoll: a condition that holds soon is seen soon, and one that
// runs a command is not run hundreds of times a second.
const MaxPoll = 50 * time.Millisecond

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
			if cond() {
				return true
			}
			pause = min(2*pause, MaxPoll)
			next.Reset(pause)
		case <-deadline.C:
			return cond()
		}
	}
}

// For waits up to d for cond to hold, and fails the test now, saying
// what it waited for, if it does not.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
