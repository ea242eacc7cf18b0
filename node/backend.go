package node

import (
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/node/ownpresence"
	"github.com/meshd/meshd/node/status"
)

// Backend is the node as its local faces see it (the control API, the
// status page): the node's own methods and those of the components that
// answer for themselves: agent cards ([cards.Book]), this node's
// presence ([ownpresence.Announcer]), the workers' claims on the inbox
// ([claims.Leases]), the inbox and history queries ([inboxq.Queries]) and
// what the node reports of itself ([status.Reporter]).
type Backend struct {
	*Node
	*cards.Book
	*ownpresence.Announcer
	*claims.Leases
	*inboxq.Queries
	*status.Reporter
}

// Backend returns the node and its components for the control API and
// the status page.
func (n *Node) Backend() Backend { return Backend{n, n.cards, n.own, n.claims, n.q, n.status} }
