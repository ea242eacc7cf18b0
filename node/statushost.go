package node

import (
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/doctor"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/status"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// statusHost is the node as node/status sees it.
type statusHost struct{ n *Node }

// newStatus makes the reporter of the node, a view over what other
// owners hold; the node keeps none (see [Node.Backend]).
func newStatus(n *Node) *status.Reporter {
	cfg := status.Config{Self: n.id.Pub, Name: n.id.Name, Home: n.cfg.Home, Seeds: n.cfg.Seeds, Started: n.life.started,
		PeerExchangeInterval: n.cfg.PeerExchangeInterval, SkewWarn: doctor.SkewWarn}
	return status.New(statusHost{n}, cfg, n.store, n.own.Table())
}

func (h statusHost) Roster() *roster.Roster           { return h.n.Roster() }
func (h statusHost) Links() []*peers.Link             { return h.n.peers.Links() }
func (h statusHost) Advertised() []string             { return h.n.peers.Advertised() }
func (h statusHost) Former(k proto.PubKey) bool       { return h.n.peers.Former.Has(k) }
func (h statusHost) Listeners() []*transport.Listener { return h.n.peers.Listeners() }
func (h statusHost) Discovering() bool                { return h.n.peers.Discovery() != nil }
func (h statusHost) Mailbox() *api.MailboxStatus      { return mailboxHost(h).status() }
func (h statusHost) Blocked() []api.Block             { return h.n.chans.Blocks().Blocks }

// Outbox is the mailbox's outbox, or nil before the mailbox is open.
func (h statusHost) Outbox() *mailbox.Outbox {
	if h.n.mail == nil {
		return nil
	}
	return h.n.mail.Outbox
}

func (h statusHost) NameUnique(r *roster.Roster, name string) bool {
	return h.n.roster.NameIndex(r).Unique(name)
}

func (h statusHost) Skew(now time.Time) time.Duration {
	d, _ := h.n.doctor.MaxSkew(now)
	return d
}

func (h statusHost) Counters() map[string]uint64 {
	c := h.n.metrics.Snapshot()
	h.n.addLinkStats(c)
	return c
}

// Queues reads the lengths of channels created before the node runs and
// never replaced, so it needs no lock.
func (h statusHost) Queues() (commitLen, commitCap, mirrorLen, mirrorCap int) {
	if h.n.mail != nil {
		mirrorLen, mirrorCap = h.n.mail.Loop.Queued()
	}
	commitLen, commitCap = h.n.rx.Queued()
	return commitLen, commitCap, mirrorLen, mirrorCap
}

func (h statusHost) QuotaRefused(r *roster.Roster) []api.QuotaRefusal {
	return h.n.chans.QuotaRefused(r)
}
