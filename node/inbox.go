package node

import (
	"github.com/meshd/meshd/proto"
)

// unsolicited reports whether se, a Response, answers no Request this node
// sent to se.From: the node keeps the recipient of each Request it sent
// (as long as its delivery record), and a Response from anyone else, who
// learned or guessed the request id, is dropped (PROTOCOL §15 step 5).
func (n *Node) unsolicited(se *proto.SignedEnvelope) bool {
	peer, ok, err := n.store.RequestRecipient(se.Response.RequestID)
	if err != nil {
		n.log.Warn("outgoing request lookup", "request_id", se.Response.RequestID, "err", err)
		return true
	}
	return !ok || !(peer.Equal(se.From) || sameMember(n.Roster(), peer, se.From))
}
