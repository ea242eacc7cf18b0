package status

import (
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// Host is what a [Reporter] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Links returns every admitted link.
	Links() []*peers.Link
	// NameUnique reports whether name belongs to one member only of r.
	NameUnique(r *roster.Roster, name string) bool
	// Advertised returns the addresses this node advertises; Former
	// whether k is a member the roster removed.
	Advertised() []string
	Former(k proto.PubKey) bool
	// Listeners returns the node's listeners; Discovering whether mDNS
	// discovery runs.
	Listeners() []*transport.Listener
	Discovering() bool
	// Skew returns the largest recent clock difference to a peer.
	Skew(now time.Time) time.Duration
	// Counters returns a copy of the node's counters with the open
	// links' pacing and queue refusals added.
	Counters() map[string]uint64
	// Outbox returns the outbox, or nil before it is open; Mailbox the
	// mirror's count and pause, or nil.
	Outbox() *mailbox.Outbox
	Mailbox() *api.MailboxStatus
	// Queues returns the fill of the commit stage's queue and of the
	// mailbox mirror's: items waiting, and the capacity.
	Queues() (commitLen, commitCap, mirrorLen, mirrorCap int)
	// QuotaRefused lists the senders refused by their channel quota;
	// Blocked the local block list.
	QuotaRefused(r *roster.Roster) []api.QuotaRefusal
	Blocked() []api.Block
}

// Config is what a [Reporter] reports of the node's settings.
type Config struct {
	Self    proto.PubKey
	Name    string // this node's name, as in its identity
	Home    string
	Seeds   []transport.Addr
	Started time.Time // when the node was created
	// PeerExchangeInterval is how often peers send their lists; reports
	// older than three of them are left out (0: none are).
	PeerExchangeInterval time.Duration
	// SkewWarn is the clock difference below which no skew is reported.
	SkewWarn time.Duration
}
