package syncer

import (
	"log/slog"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Host is what the [Syncer] sees of the node: the roster, the links,
// signing, and where it counts and drops. The envelopes of a page do not
// go through the host: they are handed over as a [Batch]. The
// store, the channel policies and the subscriptions it reads directly
// (Params).
type Host interface {
	// Roster returns the current roster.
	Roster() *roster.Roster
	// LinkTo returns the link to k, or nil.
	LinkTo(k proto.PubKey) *peers.Link
	// Links returns every link.
	Links() []*peers.Link
	// Sign builds, numbers and signs an envelope of ours.
	Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error)
	// Drop counts and logs a dropped envelope (se may be nil).
	Drop(reason Drop, se *proto.SignedEnvelope, src Source, err error)
	// Count adds n to the counter c.
	Count(c Counter, n uint64)
	// CountRefused counts a refusal with status st: of a request we
	// served (serving), or of one of ours.
	CountRefused(serving bool, st proto.HistoryStatus)
}

// Source is where an envelope came from.
type Source struct {
	Link    *peers.Link // the link it came on
	History bool        // part of a history sync response: skips the TTL check
}

// Drop is why the syncer drops an envelope; the node counts and logs it
// as its own drop reason of the same name.
type Drop uint8

// The syncer's drop reasons.
const (
	DropNone               Drop = iota
	DropShutdown                // the syncer is closed
	DropMalformed               // a nested envelope that does not parse
	DropDuplicate               // a request served before (a replay)
	DropHistoryUnsolicited      // a response to no request of ours (or from another peer, or too late)
	DropHistoryForeign          // a nested envelope that is not a channel Message of the channel asked for
	DropHistoryOverLimit        // a response with more messages or bytes than asked for
	DropHistoryBusy             // the requester has HistoryServeConcurrency requests served already
	DropHistoryNoLink           // a request from a peer we hold no link to answer on
)

// Counter is an event the syncer counts; the node defines the metric of
// each (node/syncmetrics.go).
type Counter uint8

// The syncer's counters.
const (
	Rounds          Counter = iota // catch-up rounds
	Responses                      // history responses received
	GapsForgotten                  // rounds that gave up gaps
	Envelopes                      // envelopes received in pages
	Pages                          // pages received
	Requests                       // requests sent
	Timeouts                       // requests timed out
	LatePages                      // pages used after their wait timed out
	Resumed                        // paging resumed from a cursor
	Paused                         // paging paused at MaxRoundPages
	Stalled                        // pages with more that held nothing asked for
	ServeServed                    // requests served
	ServedEnvelopes                // envelopes sent in responses
	ServeFailed                    // requests whose serving failed
	ServePaced                     // requests held back by pacing
	ServeNoRoom                    // requests dropped: the peer's send queue stayed full
	NumCounters
)

// Config is what the syncer reads of the node's configuration, defaults
// applied (see node.Config for each field).
type Config struct {
	SyncInterval            time.Duration
	SyncDelay               time.Duration
	SyncPeers               int
	SyncPageMessages        int
	SyncPageBytes           int
	SyncTimeout             time.Duration
	EnvelopeTTL             time.Duration
	HistoryServeRate        float64
	HistoryServeBurst       int
	HistoryServeConcurrency int
	// Retention is the age we keep channel p's history for (archive: as
	// an archive peer).
	Retention func(p *channel.Policy, archive bool) time.Duration
}

// Params is what [New] builds a syncer from.
type Params struct {
	Host     Host
	Config   Config
	Self     proto.PubKey
	Store    *history.Store
	Channels *channel.Set
	Subs     *channel.Subscriptions
	Log      *slog.Logger
	// RoundDone, if set, observes every finished catch-up round (a seam
	// for tests).
	RoundDone func(r Round)
}

// drop hands a drop to the host.
func (s *Syncer) drop(reason Drop, se *proto.SignedEnvelope, src Source, err error) {
	s.host.Drop(reason, se, src, err)
}

// count adds n to the counter c.
func (s *Syncer) count(c Counter, n uint64) { s.host.Count(c, n) }
