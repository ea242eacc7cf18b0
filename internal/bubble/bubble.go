// Package bubble is for tests that run in a testing/synctest bubble,
// where the clock is fake: it stands still while any goroutine of the
// bubble can run, and jumps to the next timer when all are blocked. It
// imports nothing from the project.
package bubble

import "time"

// Advance moves the calling goroutine d along the bubble's clock: it
// returns once every other goroutine of the bubble is blocked and the
// clock has reached now+d, having fired every timer due on the way. No
// real time passes. Outside a bubble it would sleep for d, so call it
// only in one (the tests that do are named *_synctest_test.go).
func Advance(d time.Duration) { time.Sleep(d) }
