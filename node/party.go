package node

import (
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// How the node names members and destinations in what it answers: the
// inbox and history queries (node/inboxq), the presence table and cards
// take these through their Hosts.

// party names a key for the API, with its roster name and role, and
// whether that name needs the fingerprint beside it.
func (n *Node) party(k proto.PubKey) api.Party {
	p := api.Party{Key: k, Fingerprint: k.Fingerprint()}
	r := n.Roster()
	if m, ok := r.Known(k); ok { // a previous key keeps its member's name
		p.Name, p.Role = m.Name, m.Role.String()
		p.NameAmbiguous = m.Name != "" && !n.roster.NameIndex(r).Unique(m.Name)
	}
	return p
}

// destText renders a destination: "#name" or "@name".
func (n *Node) destText(d proto.Destination) string {
	switch d.Kind {
	case proto.DestChannel:
		if p, ok := n.chans.Set().ByID(d.Channel); ok {
			return "#" + p.Name
		}
		return "#" + d.Channel.String()
	case proto.DestPeer:
		if m, ok := n.Roster().Known(d.Peer); ok && m.Name != "" {
			return "@" + m.Name
		}
		return "@" + d.Peer.Fingerprint()
	}
	return d.String()
}
