package node

import "github.com/meshd/meshd/node/cards"

// Backend is the node as its local faces see it (the control API, the
// status page): the node's own methods and those of the components that
// answer for themselves, agent cards ([cards.Service]).
type Backend struct {
	*Node
	*cards.Service
}

// Backend returns the node and its components for the control API and
// the status page.
func (n *Node) Backend() Backend { return Backend{n, n.cards} }
