package node

import (
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// History sync, retention and the history control endpoints live here.

// authorizeHistory applies the rules for HistoryRequest and
// HistoryResponse envelopes; it returns a drop reason or "".
func (n *Node) authorizeHistory(*roster.Roster, roster.Role, *proto.SignedEnvelope) string {
	return dropUnsupported
}

// handleHistory serves an admitted HistoryRequest or takes a
// HistoryResponse; it reports whether the envelope was used.
func (n *Node) handleHistory(se *proto.SignedEnvelope, src rxSource, now time.Time) bool {
	n.drop(dropUnsupported, se, src, nil)
	return false
}

// syncOnLinkUp starts catching up with a peer that just linked.
func (n *Node) syncOnLinkUp(*peerLink) {}

// startSync starts the goroutines of history sync and retention (each
// registered in n.wg and stopped by n.ctx).
func (n *Node) startSync() {}

// registerHistory adds the history control endpoints.
func (c *controlServer) registerHistory() {}
