package node

import (
	"slices"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/control"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Read-only accessors for the HTTP status page (package node/statuspage).
// None of them changes the node; together with [Node.PeerList] and
// [Node.PresenceTable] they are what the page shows.

// StatusInfo returns this node's status: the same answer as GET /v1/status
// on the control socket.
func (n *Node) StatusInfo() api.Status {
	r := n.Roster()
	ll := n.linkList()
	links := len(ll)
	byNet := map[string]int{}
	for _, pl := range ll {
		byNet[pl.Conn.Network()]++
	}
	adv := slices.Clone(n.peers.Advertised())
	role := "none"
	m, member := r.Member(n.id.Pub)
	if member {
		role = m.Role.String()
	}
	var seeds []string
	for _, s := range n.cfg.Seeds {
		seeds = append(seeds, s.String())
	}
	skew, _ := n.maxSkew(time.Now())
	if skew.Abs() <= skewWarn {
		skew = 0
	}
	var retry float64
	removed := !member && n.peers.Former.Has(n.id.Pub)
	if removed {
		retry = peers.RemovedRetry.Seconds()
	}
	return api.Status{
		Removed:       removed,
		RetrySeconds:  retry,
		Key:           n.id.Pub,
		Fingerprint:   n.id.Pub.Fingerprint(),
		NodeID:        n.id.Pub.NodeID().String(),
		Name:          n.id.Name,
		Role:          role,
		Org:           r.Org,
		RosterVersion: r.Version,
		RosterMembers: len(r.Members),
		Member:        member,
		Listen:        n.ListenAddrs(),
		Advertised:    adv,
		Home:          n.cfg.Home,
		Started:       n.started.UTC(),
		UptimeSeconds: time.Since(n.started).Seconds(),
		Links:         links,
		LinksByNet:    byNet,
		MDNS:          n.disc != nil,
		Seeds:         seeds,
		Counters:      n.Counters(),

		ClockSkewSeconds: skew.Seconds(),
		Mailbox:          mailboxHost{n}.status(),
		QuotaRefused:     n.quotaRefused(r),
		Blocked:          n.Blocks().Blocks,
	}
}

// RosterInfo returns the current roster, summarised as GET /v1/roster
// answers it.
func (n *Node) RosterInfo() api.Roster { return control.RosterSummary(n.Roster()) }

// ChannelList returns the channels this node holds, with this node's
// subscription state and access, sorted by name (GET /v1/channels).
func (n *Node) ChannelList() []api.Channel {
	out := []api.Channel{}
	for _, p := range n.channels.All() {
		out = append(out, n.channelInfo(p))
	}
	return out
}

// maxLinkReport bounds the peers reported from one neighbour's peer list;
// a roster is rarely larger.
const maxLinkReport = 256

// LinkReports returns, for each currently linked peer that sent a peer
// list lately, the roster members it said it is linked to. Lists come
// with peer exchange (every PeerExchangeInterval and on link up), so this
// lags the mesh by up to that interval, and a peer's links to members
// without a listen address are never reported. Reports older than three
// intervals are left out.
func (n *Node) LinkReports() map[proto.PubKey][]proto.PubKey {
	var notBefore time.Time
	if iv := n.cfg.PeerExchangeInterval; iv > 0 {
		notBefore = time.Now().Add(-3 * iv)
	}
	r := n.Roster()
	out := map[proto.PubKey][]proto.PubKey{}
	for _, pl := range n.linkList() {
		keys, ok := pl.PX.ViewKeys(pl.Key, notBefore, maxLinkReport)
		if !ok {
			continue
		}
		peers := keys[:0]
		for _, k := range keys {
			if _, ok := r.Member(k); ok {
				peers = append(peers, k)
			}
		}
		out[pl.Key] = peers
	}
	return out
}
