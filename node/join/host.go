package join

import (
	"context"
	"log/slog"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/logrl"
)

// Host is what invites and knocks see of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Self returns this node's key.
	Self() proto.PubKey
	// SignRoster signs r with this node's key.
	SignRoster(r *roster.Roster) error
	// ApplyRoster applies r, a newer version of the roster, and spreads it.
	ApplyRoster(r *roster.Roster) error
	// Advertised returns the addresses this node announces.
	Advertised() []string
	// PeerAddrs returns the addresses known for other members.
	PeerAddrs() []string
	// Pending is the list of the non-members this node refused.
	Pending() *peers.Pending
	// LinkConfig returns the configuration of this node's links, for a
	// knock; its Payload supplies this node's handshake fields.
	LinkConfig() transport.Config
	// Go runs f on a goroutine the node waits for as it closes.
	Go(f func())
	// Count counts one event c.
	Count(c Counter)
	// CountReason counts one event of kind c for reason.
	CountReason(c ReasonCounter, reason string)
}

// Counter is an event counted; the node defines the metric of each
// (node/joinhost.go).
type Counter uint8

// The counters of invites and knocks.
const (
	InviteCreated            Counter = iota // an invite made
	InviteRevoked                           // an invite revoked
	InviteUsed                              // an invite used: its joiner added
	InviteAwaitingSignatures                // an invite used, the update awaits admins' signatures
	InviteClaimedNameRefused                // a joiner's claimed name refused: it joins unnamed
	KnockReceived                           // a knock answered
	KnockRosterSent                         // the roster sent to a knocking member
	KnockSent                               // a knock made
	KnockUnanswered                         // a knock that failed to complete
	AdoptAdopted                            // a roster of another org adopted
	AdoptConfirmed                          // an admin confirmed with meshctl adopt
	NumCounters
)

// ReasonCounter is a kind of refusal counted by its reason.
type ReasonCounter uint8

// The refusals counted by reason.
const (
	InviteRejected ReasonCounter = iota // a joiner's invite refused
	PendingRefused                      // a refused non-member left out of the pending list
	AdoptRefused                        // a roster offered in a knock not adopted
	NumReasonCounters
)

// Config is what invites and knocks read of the node's configuration.
type Config struct {
	Home    string // the node's home: the invites file and roster updates
	Logger  *slog.Logger
	RateLog *logrl.Limiter // repetitive lines, per peer and reason; nil: a limiter of its own
	// Context ends as the node closes: knocks running stop.
	Context context.Context
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RateLog == nil {
		c.RateLog = logrl.New(0, 0)
	}
	if c.Context == nil {
		c.Context = context.Background()
	}
	return c
}
