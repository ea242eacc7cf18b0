package node

import (
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
)

// testHooks are the seams that only tests use: observers of internal
// steps and behaviours of older nodes. Tests pass them to newNode, which
// hands each to the component it concerns when it makes it (the
// receive side, the send side, history sync, the peers service); the
// node keeps none, and a node made by New has none.
type testHooks struct {
	// deliver is called on the commit goroutine for every envelope that
	// reaches the inbox, with the time of its commit (rx.Config.Observe).
	deliver func(se *proto.SignedEnvelope, at time.Time)
	// queue runs in the sender's sendDirect between the check for a link
	// and the store of the envelope in the peer's queue
	// (outbound.Config.Queueing).
	queue func(linked bool)
	// syncRound observes every finished catch-up round
	// (syncer.Params.RoundDone).
	syncRound func(r syncer.Round)
	// legacyPeers makes the node exchange peers as nodes did before
	// peer-update frames: whole lists only (tests of interoperation).
	legacyPeers bool
	// legacyLinks makes the node treat link-move frames as nodes did
	// before them: unknown frames, never sent (tests of interoperation).
	legacyLinks bool
}

// The seams of each component; each is nil (or zero) without hooks.

func (h *testHooks) deliverObserver() func(*proto.SignedEnvelope, time.Time) {
	if h == nil {
		return nil
	}
	return h.deliver
}

func (h *testHooks) queueObserver() func(linked bool) {
	if h == nil {
		return nil
	}
	return h.queue
}

func (h *testHooks) roundObserver() func(syncer.Round) {
	if h == nil {
		return nil
	}
	return h.syncRound
}

func (h *testHooks) legacy() peers.Legacy {
	if h == nil {
		return peers.Legacy{}
	}
	return peers.Legacy{PeerUpdates: h.legacyPeers, LinkMoves: h.legacyLinks}
}
