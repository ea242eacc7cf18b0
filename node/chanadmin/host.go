package chanadmin

import (
	"crypto/ed25519"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the [Admin] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Self returns this node's key.
	Self() proto.PubKey
	// Key returns this node's signing key, which signs its policy
	// versions.
	Key() ed25519.PrivateKey
	// ResolvePeer finds the roster member a key, fingerprint or name
	// names; its error is the one the control API answers with.
	ResolvePeer(q string) (roster.Member, error)
	// Links returns every link.
	Links() []*peers.Link
	// SendFrame queues a frame of type t on pl.
	SendFrame(pl *peers.Link, t proto.FrameType, payload []byte)
	// ChannelsChanged tells history sync that the channels or the
	// subscriptions changed.
	ChannelsChanged()
	// Count counts one event c.
	Count(c Counter)
	// Rejected counts a policy refused for reason (PROTOCOL.md §11.3):
	// counter "policy.rejected.<reason>".
	Rejected(reason string)
	// Refused logs, rate-limited per peer, a policy frame from pl that
	// was refused.
	Refused(pl *peers.Link, err error)
	// QuotaLogAllowed reports whether a refusal by the quota of the
	// sender whose fingerprint is fp may be logged now, and how many
	// such lines were held back since the last.
	QuotaLogAllowed(fp string) (ok bool, suppressed uint64)
}

// Counter is an event the admin counts; the node defines the metric of
// each (node/chanadminhost.go).
type Counter uint8

// The admin's counters.
const (
	PolicyAccepted        Counter = iota // a policy version taken
	PolicyMalformed                      // a policy document that did not parse
	PolicyPersistFailed                  // a policy or version record not written to the home
	PolicyDigestMalformed                // a policy digest frame that did not parse
	NumCounters
)
