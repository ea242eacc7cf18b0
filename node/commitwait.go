package node

import (
	"context"

	"github.com/meshd/meshd/proto"
)

// awaitStored waits until the commit stage has stored se, or ctx is done.
// It checks the store after each commit instead of polling it.
func (n *Node) awaitStored(ctx context.Context, se *proto.SignedEnvelope) {
	for {
		wake := n.commitWait()
		if seen, err := n.store.Seen(se.From, se.ID); err != nil || seen {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}

// commitWait returns a channel the commit stage closes after its next
// store transaction.
func (n *Node) commitWait() <-chan struct{} {
	for {
		if c := n.committed.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if n.committed.CompareAndSwap(nil, &c) {
			return c
		}
	}
}
