package ownpresence

import (
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the [Announcer] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Self returns this node's key.
	Self() proto.PubKey
	// Sign builds, numbers and signs an envelope of ours.
	Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error)
	// Links returns every link.
	Links() []*peers.Link
	// SendFrame queues a frame of type t on pl.
	SendFrame(pl *peers.Link, t proto.FrameType, payload []byte)
	// Party names k as the control API shows it.
	Party(k proto.PubKey) api.Party
	// Count counts one event c.
	Count(c Counter)
	// Changed counts a change of this node's presence to st.
	Changed(st proto.PresenceState)
}

// Counter is an event the announcer counts; the node defines the metric of
// each (node/ownpresencehost.go).
type Counter uint8

// The announcer's counters.
const (
	Expired Counter = iota // a member shown offline after a silence longer than the TTL
	Sent                   // an announcement sent to the links
	NumCounters
)

// Config is what the announcer reads of the node's configuration, defaults
// applied (see node.Config for each field).
type Config struct {
	PresenceTTL          time.Duration
	PresenceAwayAfter    time.Duration
	PresenceOfflineAfter time.Duration
	// MaxTTL bounds an envelope's lifetime: the dedupe horizon.
	MaxTTL time.Duration
}
