package bubble

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestAdvanceFiresTimersOnTheWay: an hour passes on the bubble's clock,
// every ticker tick on the way fires, and no real time passes.
func TestAdvanceFiresTimersOnTheWay(t *testing.T) {
	real0 := time.Now()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		ticks := make(chan int)
		go func() {
			n := 0
			for range tick.C {
				n++
				if n == 60 {
					ticks <- n
					return
				}
			}
		}()
		Advance(time.Hour)
		if got := time.Since(start); got != time.Hour {
			t.Fatalf("the clock moved %v, want an hour", got)
		}
		if n := <-ticks; n != 60 {
			t.Fatalf("%d ticks, want 60", n)
		}
	})
	if el := time.Since(real0); el > 10*time.Second {
		t.Fatalf("an hour of the bubble took %v of real time", el)
	}
}
