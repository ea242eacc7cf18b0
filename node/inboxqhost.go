package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters of node/inboxq.
var (
	famSubagent = newFamily("meshd_subagent_results_total", "Subagent results posted to this node's own inbox (local only, never sent).")

	// inboxqCounters maps each counter of node/inboxq to its metric.
	inboxqCounters = [inboxq.NumCounters]counter{
		inboxq.ReadAmbiguous:   newEvent("read.refused.ambiguous"),
		inboxq.FilterRefused:   newEvent("inbox.refused.filter"),
		inboxq.ReplyRefused:    newEvent("reply.refused"),
		inboxq.ReplySent:       newEvent("reply.sent"),
		inboxq.SearchRuns:      newEvent("search.runs"),
		inboxq.SubagentRefused: newEvent("inbox.subagent_refused"),
		inboxq.SubagentPosted:  newCounter("inbox.subagent_results", famSubagent),
		inboxq.InboxItems:      cInboxItems,
	}
)

// The counters of node/claims, which inboxq holds.
var (
	famClaims = newFamily("meshd_inbox_claims_total", "Inbox claims by workers of a pool, by result.", "result")

	// claimCounters maps each counter of node/claims to its metric.
	claimCounters = [claims.NumCounters]counter{
		claims.Released: newCounter("claim.released", famClaims, "released"),
		claims.Conflict: newCounter("claim.conflict", famClaims, "conflict"),
		claims.Taken:    newCounter("claim.taken", famClaims, "taken"),
	}
)

// inboxqHost is the node as node/inboxq sees it.
type inboxqHost struct{ n *Node }

// newInboxq makes the queries over the node's store.
func newInboxq(n *Node) *inboxq.Queries {
	cfg := inboxq.Config{Self: n.id.Pub, OfflineWindow: n.cfg.OfflineWindow, MaxDeliveryRecords: maxDeliveryRecords}
	return inboxq.New(inboxqHost{n}, n.store, n.out.Counter(), cfg, n.log, n.life.ctx.Done())
}

func (h inboxqHost) Roster() *roster.Roster                           { return h.n.Roster() }
func (h inboxqHost) Party(k proto.PubKey) api.Party                   { return h.n.party(k) }
func (h inboxqHost) DestText(d proto.Destination) string              { return h.n.destText(d) }
func (h inboxqHost) ResolvePeer(q string) (roster.Member, error)      { return h.n.resolvePeer(q) }
func (h inboxqHost) ResolveChannel(q string) (*channel.Policy, error) { return h.n.resolveChannel(q) }
func (h inboxqHost) Channel(id uuid.UUID) (*channel.Policy, bool)     { return h.n.chans.Set().ByID(id) }
func (h inboxqHost) MarkFailed(x *api.Item, se *proto.SignedEnvelope) { h.n.out.MarkFailed(x, se) }
func (h inboxqHost) Acted()                                           { h.n.own.Acted() }
func (h inboxqHost) ClientWaiting() func()                            { return h.n.own.ClientWaiting() }
func (h inboxqHost) Send(req api.Send) (*api.Sent, error)             { return h.n.out.Send(req) }
func (h inboxqHost) Count(c inboxq.Counter)                           { h.n.metrics.inc(inboxqCounters[c]) }

func (h inboxqHost) Attachments(se *proto.SignedEnvelope, delivered time.Time) []api.Attachment {
	return h.n.renderAttachments(se, delivered)
}

// Read moves the mailbox file of the item read to read/.
func (h inboxqHost) Read(from proto.PubKey, id uuid.UUID) { mailboxHost(h).read(from, id) }

func (h inboxqHost) CountClaim(c claims.Counter, d uint64) { h.n.metrics.add(claimCounters[c], d) }

func (h inboxqHost) Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	return h.n.out.Sign(to, kind, ttl, fill)
}

func (h inboxqHost) Delivered(se *proto.SignedEnvelope, prio history.Priority, wakes bool, at time.Time) {
	mailboxHost(h).delivered(inboxDelivery{se: se, prio: prio, wakes: wakes, at: at})
}
