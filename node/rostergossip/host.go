package rostergossip

import (
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the [Keeper] sees of the node.
type Host interface {
	// Self returns this node's key.
	Self() proto.PubKey
	// SendFrame queues a frame of type t on pl.
	SendFrame(pl *peers.Link, t proto.FrameType, payload []byte)
	// Swap replaces the roster cur by r in the peer table: with the
	// peers mutex held it calls store (which makes r current), forgets
	// the addresses and seeds of members r removed, and returns the
	// links of the members r keeps but from (to push r on) and of those
	// it removed (to close). Taken under the peers mutex, a link being
	// admitted either sees r or is in drop.
	Swap(cur, r *roster.Roster, store func(), from *peers.Link) (push, drop []*peers.Link)
	// Retire forgets, in the peer table, every peer whose key r accepts
	// no longer but as a member's previous key past its window, and
	// returns their links.
	Retire(r *roster.Roster) []*peers.Link
	// CloseLink closes pl, saying why, without waiting.
	CloseLink(pl *peers.Link, why string)
	// Applied tells the rest of the node that r replaced cur: discovery's
	// roster version, the channel policies' revalidation, history sync,
	// the presence and the queues of members r removed.
	Applied(cur, r *roster.Roster)
	// MemberRekeyed tells the node that r moved member m to a new key
	// (m.PrevKey is its previous one).
	MemberRekeyed(m roster.Member)
	// KeySwitched tells the node, once it runs, that this start switched
	// from the key prev to a new one.
	KeySwitched(prev proto.PubKey)
	// Count counts one event c.
	Count(c Counter)
	// Rejected counts a roster update refused for reason: counter
	// "roster.rejected.<reason>".
	Rejected(reason string)
	// Refused logs, rate-limited per peer and reason, a roster frame from
	// pl that was refused; attrs go before the error.
	Refused(pl *peers.Link, reason string, err error, attrs ...any)
}

// Counter is an event the keeper counts; the node defines the metric of
// each (node/rosterhost.go).
type Counter uint8

// The keeper's counters.
const (
	Pushed             Counter = iota // the roster pushed to a peer with an older one
	Malformed                         // a roster that did not parse
	Rollback                          // a peer's roster older than ours (answered with ours)
	PersistFailed                     // an update taken but not written to the home
	Accepted                          // an update taken
	LinkRemovedMember                 // the link of a member an update removed, closed
	KeySwitchedAtStart                // this node took its new key at start
	MemberRekeyed                     // an update moved a member to a new key
	RestartNeeded                     // the roster lists this node's new key
	LinkRetiredKey                    // the link of a previous key past its window, closed
	NumCounters
)
