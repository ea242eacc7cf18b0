package node

import (
	"context"
	"sync"
	"time"
)

// runState is the node's life from New to Close: when it started, the
// context that every goroutine of the node ends with, the group they
// join, the home lock and the one run of Close with its result.
type runState struct {
	started time.Time // when New was called: the status's uptime
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every goroutine the node starts
	unlock  func() error   // releases the home lock; nil until it is held

	closeOnce sync.Once
	closeErr  error
}
