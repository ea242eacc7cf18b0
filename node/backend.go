package node

import (
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/chanadmin"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/doctor"
	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/ownpresence"
	"github.com/meshd/meshd/node/rostergossip"
)

// Backend is the node as its local faces see it (the control API, the
// status page): the node's own methods and those of the components that
// answer for themselves: agent cards ([cards.Book]), this node's
// presence ([ownpresence.Announcer]), the workers' claims on the
// inbox ([claims.Leases]), invites ([join.Invites]), knocks, adoption and
// the pending list ([join.Knocks]) and the doctor ([doctor.Diagnosis]).
type Backend struct {
	*Node
	*cards.Book
	*ownpresence.Announcer
	*claims.Leases
	*chanadmin.Admin
	*rostergossip.Keeper
	*join.Invites
	*join.Knocks
	*doctor.Diagnosis
}

// Backend returns the node and its components for the control API and
// the status page.
func (n *Node) Backend() Backend {
	return Backend{n, n.cards, n.own, n.claims, n.chans, n.roster, n.invites, n.knocks, n.doctor}
}
