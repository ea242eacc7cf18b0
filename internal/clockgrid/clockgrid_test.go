package clockgrid

import (
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	base := time.Unix(1_800_000_000, 0) // a multiple of every grid below
	for _, c := range []struct {
		now        time.Duration // after base
		wait, grid time.Duration
		want       time.Duration
	}{
		{0, 0, time.Second, 0},                                           // on the grid already
		{0, time.Nanosecond, time.Second, time.Second},                   // strictly after now
		{300 * time.Millisecond, 0, time.Second, 700 * time.Millisecond}, // next whole second
		{300 * time.Millisecond, 2 * time.Second, time.Second, 2700 * time.Millisecond},
		{300 * time.Millisecond, 700 * time.Millisecond, time.Second, 700 * time.Millisecond},
		{10 * time.Second, 5 * time.Second, 30 * time.Second, 20 * time.Second},
		{300 * time.Millisecond, 2 * time.Second, 0, 2 * time.Second}, // no grid
		{300 * time.Millisecond, 2 * time.Second, -1, 2 * time.Second},
	} {
		if got := Wait(base.Add(c.now), c.wait, c.grid); got != c.want {
			t.Errorf("Wait(base+%v, %v, %v) = %v, want %v", c.now, c.wait, c.grid, got, c.want)
		}
	}
}

func TestNext(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		now, iv, want time.Duration
	}{
		{0, 10 * time.Second, 10 * time.Second}, // on a multiple: the next one
		{3 * time.Second, 10 * time.Second, 7 * time.Second},
		{3 * time.Second, 0, time.Second}, // no interval
		{3 * time.Second, -1, time.Second},
	} {
		if got := Next(base.Add(c.now), c.iv); got != c.want {
			t.Errorf("Next(base+%v, %v) = %v, want %v", c.now, c.iv, got, c.want)
		}
	}
}
