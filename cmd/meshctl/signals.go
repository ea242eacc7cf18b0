package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// interruptContext returns a context that ends on Ctrl-C (SIGINT) or
// SIGTERM, for the commands that run until stopped: tail, mcp and
// demo --keep. Tests replace it to stop them without signals.
var interruptContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
