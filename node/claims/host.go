package claims

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// Host is what [Leases] sees of the node.
type Host interface {
	// Self returns this node's key.
	Self() proto.PubKey
	// Item finds inbox item id, of sender from (a member's name,
	// fingerprint or key; "" for any) when several share it; its error
	// is the one the control API answers with.
	Item(id uuid.UUID, from string) (history.InboxItem, error)
	// Match reads an inbox filter: the match of an item's metadata and
	// the earliest delivery time it admits.
	Match(f api.InboxFilter) (match func(*history.Meta) bool, since time.Time, err error)
	// Render renders an inbox item as the control API shows it (its
	// claim included, from [Leases.Of]).
	Render(it history.InboxItem) (api.Item, error)
	// Woken returns a channel closed when the next waking item is
	// delivered.
	Woken() <-chan struct{}
	// Read runs after an answered request was marked read in the store.
	Read(from proto.PubKey, id uuid.UUID)
	// Count adds d to the counter c.
	Count(c Counter, d uint64)
}

// Counter is an event the leases count; the node defines the metric of
// each (node/claimshost.go).
type Counter uint8

// The counters of claims.
const (
	Released Counter = iota // a claim given up, read or answered
	Conflict                // a claim refused: another worker holds the item, or it is read
	Taken                   // an item claimed
	NumCounters
)

// Config is how much of the inbox one pass of ClaimNext reads at a time.
type Config struct {
	PageItems int // items a page
	PageBytes int // bytes a page
}
