package cards

import (
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the [Book] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Self returns this node's key.
	Self() proto.PubKey
	// SignCard signs c as this node.
	SignCard(c *proto.Card) error
	// Links returns every link.
	Links() []*peers.Link
	// SendFrame queues a frame of type t on pl.
	SendFrame(pl *peers.Link, t proto.FrameType, payload []byte)
	// ResolvePeer finds the roster member a key, fingerprint or name
	// names; its error is the one the control API answers with.
	ResolvePeer(q string) (proto.PubKey, error)
	// Party names k as the control API shows it.
	Party(k proto.PubKey) api.Party
	// Presence returns k's presence now, if any is known.
	Presence(k proto.PubKey, now time.Time) (proto.PresenceState, bool)
	// Count counts one event c.
	Count(c Counter)
	// Refused counts and logs (rate-limited, per peer) a card frame
	// from pl refused for reason.
	Refused(pl *peers.Link, reason Reason, err error)
}

// Counter is an event the book counts; the node defines the metric of
// each (node/cardshost.go).
type Counter uint8

// The book's counters.
const (
	LoadFailed    Counter = iota // a card file in the home skipped at start
	Paced                        // a card held back: it came within a second of its signer's last
	PersistFailed                // a card taken but not written to the home
	Accepted                     // a card taken, this node's own included
	NumCounters
)

// Reason is why a card frame is refused: counter "card.rejected.<reason>".
type Reason string

// The reasons a card frame is refused (PROTOCOL.md §19.3).
const (
	TooLarge     Reason = "too_large"
	Malformed    Reason = "malformed"
	NonCanonical Reason = "non_canonical"
	Invalid      Reason = "invalid"
	NotSelf      Reason = "not_self"
	NotMember    Reason = "not_member"
	Stale        Reason = "stale"
	BadSignature Reason = "bad_signature"
)
