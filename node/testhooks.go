package node

import (
	"time"

	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
)

// testHooks are the seams that only tests use: observers of internal
// steps and behaviours of older nodes. Tests pass them to newNode; a
// node made by New has none (nil), so the production structs carry no
// field that only tests set, and each seam costs a nil check.
type testHooks struct {
	// deliver is called on the commit goroutine for every envelope that
	// reaches the inbox, with the time of its commit.
	deliver func(se *proto.SignedEnvelope, at time.Time)
	// queue runs in the sender's sendDirect (node/outbound, through
	// the host's Queueing) between the check for a link and the store
	// of the envelope in the peer's queue.
	queue func(linked bool)
	// syncRound observes every finished catch-up round.
	syncRound func(r syncer.Round)
	// legacyPeers makes the node exchange peers as nodes did before
	// peer-update frames: whole lists only (tests of interoperation).
	legacyPeers bool
	// legacyLinks makes the node treat link-move frames as nodes did
	// before them: unknown frames, never sent (tests of interoperation).
	legacyLinks bool
}

// deliverObserver returns the deliver seam, or nil.
func (h *testHooks) deliverObserver() func(*proto.SignedEnvelope, time.Time) {
	if h == nil {
		return nil
	}
	return h.deliver
}

func (h *testHooks) onQueue(linked bool) {
	if h != nil && h.queue != nil {
		h.queue(linked)
	}
}

// oldPeerExchange reports whether the node exchanges peers as nodes did
// before peer-update frames.
func (h *testHooks) oldPeerExchange() bool { return h != nil && h.legacyPeers }

// oldLinkMoves reports whether the node ignores link-move frames as nodes
// did before them.
func (h *testHooks) oldLinkMoves() bool { return h != nil && h.legacyLinks }
