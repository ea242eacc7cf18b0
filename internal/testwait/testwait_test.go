package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if !Until(5*time.Second, func() bool { return n.Load() == 3 }) {
		t.Fatal("Until gave up on a condition that came true")
	}
	start := time.Now()
	if Until(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a false condition true")
	}
	if took := time.Since(start); took < 30*time.Millisecond || took > 5*time.Second {
		t.Errorf("Until gave up after %v, want 30ms", took)
	}
	if !Until(0, func() bool { return true }) {
		t.Error("Until with no time left did not check the condition")
	}
}

func TestNextPause(t *testing.T) {
	for _, c := range []struct{ pause, cost, want time.Duration }{
		{time.Millisecond, 30 * time.Millisecond, 2 * time.Millisecond}, // growing: cost not yet counted
		{16 * time.Millisecond, 0, 32 * time.Millisecond},
		{32 * time.Millisecond, time.Millisecond, MaxPoll},       // a cheap check: MaxPoll
		{MaxPoll, 30 * time.Millisecond, 120 * time.Millisecond}, // a command: 4x its cost
		{MaxPoll, 2 * time.Second, time.Second},                  // bounded
		{120 * time.Millisecond, time.Millisecond, MaxPoll},      // cheap again: back to MaxPoll
	} {
		if got := nextPause(c.pause, c.cost); got != c.want {
			t.Errorf("nextPause(%v, %v) = %v, want %v", c.pause, c.cost, got, c.want)
		}
	}
}
