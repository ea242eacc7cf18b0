package statuspage

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// Source is the node a status page shows; node.Backend implements it. Every
// method only reads.
type Source interface {
	// StatusInfo is this node, as GET /v1/status answers.
	StatusInfo() api.Status
	// RosterInfo is the current roster, as GET /v1/roster answers.
	RosterInfo() api.Roster
	// PeerList is the linked peers, as GET /v1/peers answers.
	PeerList() []api.Peer
	// PresenceTable is the presence table, as GET /v1/presence answers.
	PresenceTable() api.Presence
	// ChannelList is the channels with subscription state.
	ChannelList() []api.Channel
	// CardList is the members' agent cards, as GET /v1/cards answers.
	CardList(intent string) api.Cards
	// LinkReports is, per linked peer, the members it says it is linked to.
	LinkReports() map[proto.PubKey][]proto.PubKey
	// RecentItems is up to limit inbox items, oldest first, marking none read.
	RecentItems(limit int) ([]api.Item, error)
	// SubscribeItems registers a reader of inbox items as they are
	// delivered; lagged reports (once) that items were dropped for it.
	SubscribeItems() (items <-chan api.Delivered, lagged func() bool, cancel func())
}

// Snapshot is the state the page shows, sent as "event: state" and by
// GET /api/state.
type Snapshot struct {
	Time     time.Time     `json:"time"` // when it was taken, by the node's clock
	Self     api.Status    `json:"self"`
	Roster   api.Roster    `json:"roster"`
	Peers    []api.Peer    `json:"peers"`
	Presence api.Presence  `json:"presence"`
	Channels []api.Channel `json:"channels"`
	Cards    []api.Card    `json:"cards"`
	Graph    Graph         `json:"graph"`
}

// Graph is the mesh's link graph as this node knows it: its own links,
// and the links its neighbours reported in peer exchange.
type Graph struct {
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is one roster member (or this node) in a [Graph].
type GraphNode struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	Name        string       `json:"name,omitempty"`
	Role        string       `json:"role"`
	Presence    string       `json:"presence,omitempty"` // online, away or offline; empty when unknown
	Self        bool         `json:"self,omitempty"`
	Linked      bool         `json:"linked,omitempty"` // this node holds a link to it
}

// Edge kinds of a [GraphEdge].
const (
	EdgeLink     = "link"     // a link of this node's own
	EdgeReported = "reported" // a link a neighbour reported
)

// GraphEdge is one link between two members, named by their keys.
type GraphEdge struct {
	A       proto.PubKey `json:"a"`
	B       proto.PubKey `json:"b"`
	Kind    string       `json:"kind"`              // EdgeLink or EdgeReported
	Network string       `json:"network,omitempty"` // tcp or unix, for EdgeLink
}

// takeSnapshot reads the source once.
func takeSnapshot(src Source) Snapshot {
	st := src.StatusInfo()
	r := src.RosterInfo()
	peers := src.PeerList()
	pres := src.PresenceTable()
	chans := src.ChannelList()
	if peers == nil {
		peers = []api.Peer{}
	}
	if chans == nil {
		chans = []api.Channel{}
	}
	if r.Members == nil {
		r.Members = []api.Member{}
	}
	return Snapshot{
		Time:     time.Now().UTC(),
		Self:     st,
		Roster:   r,
		Peers:    peers,
		Presence: pres,
		Channels: chans,
		Cards:    src.CardList("").Cards,
		Graph:    buildGraph(st, r, peers, pres, src.LinkReports()),
	}
}

// buildGraph draws the roster's members as nodes, this node first, then
// by name; this node's links and the reported links as edges, each pair
// once (this node's own link wins over a report of it).
func buildGraph(self api.Status, r api.Roster, peers []api.Peer, pres api.Presence, reports map[proto.PubKey][]proto.PubKey) Graph {
	g := Graph{Nodes: []GraphNode{}, Edges: []GraphEdge{}}
	state := map[proto.PubKey]string{}
	for _, e := range pres.Entries {
		state[e.Key] = e.State
	}
	linked := map[proto.PubKey]bool{}
	for _, p := range peers {
		linked[p.Key] = true
	}
	index := map[proto.PubKey]bool{self.Key: true}
	g.Nodes = append(g.Nodes, GraphNode{Key: self.Key, Fingerprint: self.Fingerprint, Name: self.Name,
		Role: self.Role, Presence: state[self.Key], Self: true})
	var others []GraphNode
	add := func(n GraphNode) {
		if index[n.Key] {
			return
		}
		index[n.Key] = true
		others = append(others, n)
	}
	for _, m := range r.Members {
		add(GraphNode{Key: m.Key, Fingerprint: m.Fingerprint, Name: m.Name, Role: m.Role,
			Presence: state[m.Key], Linked: linked[m.Key]})
	}
	for _, p := range peers { // linked but, oddly, not in the roster summary
		add(GraphNode{Key: p.Key, Fingerprint: p.Fingerprint, Name: p.Name, Role: p.Role,
			Presence: state[p.Key], Linked: true})
	}
	slices.SortFunc(others, func(a, b GraphNode) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Key.String(), b.Key.String()))
	})
	g.Nodes = append(g.Nodes, others...)

	type pair struct{ a, b proto.PubKey }
	norm := func(a, b proto.PubKey) pair {
		if a.String() > b.String() {
			a, b = b, a
		}
		return pair{a, b}
	}
	seen := map[pair]bool{}
	for _, p := range peers {
		k := norm(self.Key, p.Key)
		if seen[k] {
			continue
		}
		seen[k] = true
		g.Edges = append(g.Edges, GraphEdge{A: k.a, B: k.b, Kind: EdgeLink, Network: p.Network})
	}
	for from, tos := range reports {
		if !index[from] {
			continue
		}
		for _, to := range tos {
			if !index[to] || to.Equal(from) {
				continue
			}
			k := norm(from, to)
			if seen[k] {
				continue
			}
			seen[k] = true
			g.Edges = append(g.Edges, GraphEdge{A: k.a, B: k.b, Kind: EdgeReported})
		}
	}
	slices.SortFunc(g.Edges, func(x, y GraphEdge) int {
		return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.A.String(), y.A.String()),
			strings.Compare(x.B.String(), y.B.String()))
	})
	return g
}
