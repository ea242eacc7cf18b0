package node

import (
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/outbound"
	"github.com/meshd/meshd/node/ownpresence"
)

// Backend is the node as its local faces see it (the control API, the
// status page): the node's own methods and those of the components that
// answer for themselves: agent cards ([cards.Book]), this node's
// presence ([ownpresence.Announcer]), the workers' claims on the
// inbox ([claims.Leases]) and the send side ([outbound.Sender]: send,
// request, respond, cancel and the delivery records).
type Backend struct {
	*Node
	*cards.Book
	*ownpresence.Announcer
	*claims.Leases
	*outbound.Sender
}

// Backend returns the node and its components for the control API and
// the status page.
func (n *Node) Backend() Backend { return Backend{n, n.cards, n.own, n.claims, n.out} }
