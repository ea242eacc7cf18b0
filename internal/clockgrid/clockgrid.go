// Package clockgrid aligns idle timers to the wall clock. An idle process
// pays a wake-up for each timer that fires; timers that fall on the same
// multiples of an interval fire in one wake-up, and since the nodes of a
// mesh read nearly the same clock, their peers' traffic arrives together
// too. It imports nothing from the project.
package clockgrid

import "time"

// Wait returns how long from now until the first instant at or after
// now+wait that is a multiple of grid on the clock; wait itself when grid
// is not positive.
func Wait(now time.Time, wait, grid time.Duration) time.Duration {
	if grid <= 0 {
		return wait
	}
	due := now.Add(wait)
	at := due.Truncate(grid)
	if at.Before(due) {
		at = at.Add(grid)
	}
	return at.Sub(now)
}

// Next returns how long from now until the next multiple of iv on the
// clock, strictly after now (iv when now is one); a second when iv is not
// positive.
func Next(now time.Time, iv time.Duration) time.Duration {
	if iv <= 0 {
		return time.Second
	}
	return Wait(now, time.Nanosecond, iv)
}
