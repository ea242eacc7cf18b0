package node

import (
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/chanadmin"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/doctor"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/outbound"
	"github.com/meshd/meshd/node/ownpresence"
	"github.com/meshd/meshd/node/rostergossip"
	"github.com/meshd/meshd/node/status"
)

// Backend is the node as its local faces see it (the control API, the
// status page, the metrics endpoint): the node's own methods and those
// of the components that answer for themselves: agent cards
// ([cards.Book]), this node's presence ([ownpresence.Announcer]), the
// workers' claims on the inbox ([claims.Leases]), channel administration
// ([chanadmin.Admin]), the roster ([rostergossip.Keeper]), invites,
// knocks, adoption and the pending list ([join.Join]), the doctor ([doctor.Diagnosis]), the inbox and history
// queries ([inboxq.Queries]), what the node reports of itself
// ([status.Reporter]) and the send side ([outbound.Sender]: send,
// request, respond, cancel and the delivery records).
type Backend struct {
	*Node
	*cards.Book
	*ownpresence.Announcer
	*claims.Leases
	*chanadmin.Admin
	*rostergossip.Keeper
	*join.Join
	*doctor.Diagnosis
	*inboxq.Queries
	*status.Reporter
	*outbound.Sender
}

// Backend returns the node and its components for the control API, the
// status page and the metrics endpoint. Its [status.Reporter] is made
// here: a view over what the other owners hold, which only these faces
// ask for.
func (n *Node) Backend() Backend {
	return Backend{n, n.cards, n.own, n.q.Claims, n.chans, n.roster, n.join, n.doctor, n.q, newStatus(n), n.out}
}
