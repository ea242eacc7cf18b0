package main

import (
	"os"
	"time"
)

// measuring reports whether this run measures the figures the docs quote
// (MESHD_BENCH=1). Tests whose window or volume is longer than what they
// assert needs run the documented one then, and a shorter one otherwise.
func measuring() bool { return os.Getenv("MESHD_BENCH") == "1" }

// window is long when measuring, else short.
func window(short, long time.Duration) time.Duration {
	if measuring() {
		return long
	}
	return short
}
