package outbound

import (
	"crypto/ed25519"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport/logrl"
)

// Host is what a [Sender] sees of the node.
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// Acted records that this node's agent acted (it sent something).
	Acted()
	// MemberToSend refuses a send while this node is not in the roster.
	MemberToSend() error
	// ResolvePeer finds a roster member by key, fingerprint or name;
	// ResolveChannel a channel by name or id. Their errors are the ones
	// the control API answers with.
	ResolvePeer(q string) (roster.Member, error)
	ResolveChannel(q string) (*channel.Policy, error)
	// MemberLabel names k as "name (fingerprint)", or by fingerprint.
	MemberLabel(k proto.PubKey) string
	// AttachFiles reads the files a send attaches.
	AttachFiles(paths []string) ([]proto.Attachment, error)
	// Answered runs after a response to request id of from was sent.
	Answered(from proto.PubKey, id uuid.UUID)
	// Sent runs for each envelope this node sent (the sent folder).
	Sent(se *proto.SignedEnvelope)
	// PreviousKey returns the key k replaced, if k's member rotated.
	PreviousKey(k proto.PubKey) (proto.PubKey, bool)
	// Party, DestText and AttachmentNote render delivery records.
	Party(k proto.PubKey) api.Party
	DestText(d proto.Destination) string
	AttachmentNote(id uuid.UUID, r history.DeliveryRecord) string
	// FailedItems hands our envelopes whose delivery failed to the inbox's
	// consumers as delivery_failed items, delivered at, and wakes inbox
	// waiters if wake.
	FailedItems(ses []*proto.SignedEnvelope, at time.Time, wake bool)
	// CountFailed counts a delivery that ended in state st.
	CountFailed(st history.DeliveryState)
	// IsLocalItem reports whether se is an item this node wrote to its
	// own inbox (not a failed delivery).
	IsLocalItem(se *proto.SignedEnvelope) bool
	// Count adds d to the counter c; CountSent counts an envelope of
	// kind that this node originated.
	Count(c Counter, d uint64)
	CountSent(kind proto.Kind)
}

// Links is the peer table as a [Sender] uses it: a *peers.Service.
type Links interface {
	// Lock and Unlock hold the table still for LinkedLocked.
	Lock()
	Unlock()
	// LinkedLocked and Linked return the link to k, or nil.
	LinkedLocked(k proto.PubKey) *peers.Link
	Linked(k proto.PubKey) *peers.Link
	// Send queues a frame on pl; AckVia is the link an ack for what
	// came on pl goes on.
	Send(pl *peers.Link, t proto.FrameType, payload []byte)
	AckVia(pl *peers.Link) *peers.Link
}

// Received is a received request's sender and hop.
type Received struct {
	From proto.PubKey
	Hop  uint8
}

// Counter is an event the sender counts; the node defines the metric of
// each (node/outboundhost.go).
type Counter uint8

// The counters of the send side.
const (
	Copies            Counter = iota // envelope copies handed to link send queues
	Forwarded                        // kept envelopes sent again to a peer that linked
	Kept                             // direct envelopes kept for a peer not linked
	Acked                            // kept envelopes a peer acknowledged
	DroppedQueue                     // a copy a link's queue refused
	RefusedHopLimit                  // a follow-up request past the hop limit
	RefusedReplyDepth                // a reply past reply_depth_max
	StoreFailed                      // a channel message sent but not kept
	AckMalformed                     // an ack frame that did not parse
	AckUncounted                     // readers' acks not counted (too many waiting)
	RespondAmbiguous                 // a response to a request id several sent
	RespondTwice                     // a second final answer refused
	Cancels                          // cancel requests sent
	NumCounters
)

// Config is what a [Sender] is built with.
type Config struct {
	Self    proto.PubKey
	Key     ed25519.PrivateKey // our identity key
	Counter *history.SendCounter
	Store   *history.Store
	Peers   Links // the peer table (a *peers.Service)
	Log     *slog.Logger
	RateLog *logrl.Limiter // repetitive log lines

	EnvelopeTTL     time.Duration // the TTL of channel messages
	OfflineWindow   time.Duration // the TTL of direct envelopes (store-and-forward)
	DirectRetention time.Duration // how long delivery records are kept
	MaxReplyDepth   int           // the deepest reply sent; 0: no limit

	// Queueing, if set, runs before a direct envelope is kept, with
	// whether its peer looked linked (a seam for tests of the race
	// between a link and the queue).
	Queueing func(linked bool)
}
