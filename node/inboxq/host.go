package inboxq

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what [Queries] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Party names a key for the API, with its roster name and role.
	Party(k proto.PubKey) api.Party
	// DestText renders a destination: "#name" or "@name".
	DestText(d proto.Destination) string
	// ResolvePeer finds a member by name, fingerprint or key;
	// ResolveChannel a channel by name or id. Their errors are the ones
	// the control API answers with.
	ResolvePeer(q string) (roster.Member, error)
	ResolveChannel(q string) (*channel.Policy, error)

	// Channel returns the channel of id, if this node holds it.
	Channel(id uuid.UUID) (*channel.Policy, bool)

	// Attachments lists se's attachments for the API, with their state.
	Attachments(se *proto.SignedEnvelope, delivered time.Time) []api.Attachment
	// MarkFailed marks x, the rendering of this node's own envelope se
	// back in its inbox, with the failure of its delivery.
	MarkFailed(x *api.Item, se *proto.SignedEnvelope)
	// Read runs after the store marked inbox item (from, id) read (and
	// its claim, if any, was released).
	Read(from proto.PubKey, id uuid.UUID)
	// Acted records a request of the agent; ClientWaiting one that waits
	// on the inbox until end is called (its presence follows them).
	Acted()
	ClientWaiting() (end func())

	// Send sends a message as meshctl send does.
	Send(req api.Send) (*api.Sent, error)
	// Sign signs an envelope of this node's.
	Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error)
	// Delivered hands a new inbox item of this node's own making to the
	// mailbox mirror and the event subscribers.
	Delivered(se *proto.SignedEnvelope, prio history.Priority, wakes bool, at time.Time)
	// Count counts one event c.
	Count(c Counter)
	// CountClaim adds d to the claims' counter c.
	CountClaim(c claims.Counter, d uint64)
}

// Counter is an event the queries count; the node defines the metric of
// each (node/inboxqhost.go).
type Counter uint8

// The counters of inboxq.
const (
	ReadAmbiguous   Counter = iota // a read (or reply) of an id several senders share, without the sender
	FilterRefused                  // an inbox filter naming an unknown kind or channel
	ReplyRefused                   // a reply to a delivery_failed item
	ReplySent                      // a reply sent
	SearchRuns                     // a search run
	SubagentRefused                // a subagent result refused
	SubagentPosted                 // a subagent result put in the inbox
	InboxItems                     // an item added to the inbox
	NumCounters
)

// Config is what the queries read of the node's settings.
type Config struct {
	Self proto.PubKey
	// OfflineWindow is the TTL of a subagent result.
	OfflineWindow time.Duration
	// MaxDeliveryRecords bounds the delivery records one list reads.
	MaxDeliveryRecords int
}
