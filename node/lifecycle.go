package node

import (
	"context"
	"sync"
)

// runState is the node's life from New to Close: the context that every
// goroutine of the node ends with, the group they join, the home lock
// and the one run of Close with its result.
type runState struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the node starts
	unlock func() error   // releases the home lock; nil until it is held

	closeOnce sync.Once
	closeErr  error
}
