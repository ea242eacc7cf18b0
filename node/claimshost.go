package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/node/inboxq"
	"github.com/meshd/meshd/proto"
)

// The counters of node/claims.
var (
	famClaims = newFamily("meshd_inbox_claims_total", "Inbox claims by workers of a pool, by result.", "result")

	// claimCounters maps each counter of node/claims to its metric.
	claimCounters = [claims.NumCounters]counter{
		claims.Released: newCounter("claim.released", famClaims, "released"),
		claims.Conflict: newCounter("claim.conflict", famClaims, "conflict"),
		claims.Taken:    newCounter("claim.taken", famClaims, "taken"),
	}
)

// claimsHost is the node as node/claims sees it.
type claimsHost struct{ n *Node }

// newClaims makes the claims on the inbox of the node's store.
func newClaims(n *Node) *claims.Leases {
	cfg := claims.Config{PageItems: inboxq.MaxAnswer, PageBytes: inboxq.MaxBytes}
	return claims.New(claimsHost{n}, n.store, cfg, n.log, n.life.ctx.Done())
}

func (h claimsHost) Self() proto.PubKey                            { return h.n.id.Pub }
func (h claimsHost) Render(it history.InboxItem) (api.Item, error) { return h.n.q.Render(it) }
func (h claimsHost) Woken() <-chan struct{}                        { return h.n.q.Woken() }
func (h claimsHost) Read(from proto.PubKey, id uuid.UUID)          { mailboxHost(h).read(from, id) }
func (h claimsHost) Count(c claims.Counter, d uint64)              { h.n.metrics.add(claimCounters[c], d) }
func (h claimsHost) Item(id uuid.UUID, from string) (history.InboxItem, error) {
	return h.n.q.Item(id, from)
}

func (h claimsHost) Match(f api.InboxFilter) (func(*history.Meta) bool, time.Time, error) {
	return h.n.q.Match(f)
}
