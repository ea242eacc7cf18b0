package inboxq

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/proto"
)

// claimsHost is the inbox as the workers' claims on its items see it
// ([claims.Host]): the queries find, filter and render the items and
// wake the waits; the node moves an answered item's mailbox file and
// counts.
type claimsHost struct{ q *Queries }

func (h claimsHost) Self() proto.PubKey                            { return h.q.cfg.Self }
func (h claimsHost) Render(it history.InboxItem) (api.Item, error) { return h.q.Render(it) }
func (h claimsHost) Woken() <-chan struct{}                        { return h.q.Woken() }
func (h claimsHost) Read(from proto.PubKey, id uuid.UUID)          { h.q.host.Read(from, id) }
func (h claimsHost) Count(c claims.Counter, d uint64)              { h.q.host.CountClaim(c, d) }

func (h claimsHost) Item(id uuid.UUID, from string) (history.InboxItem, error) {
	return h.q.Item(id, from)
}

func (h claimsHost) Match(f api.InboxFilter) (func(*history.Meta) bool, time.Time, error) {
	return h.q.Match(f)
}

// claimOf returns the live claim of a worker on inbox item (from, id).
func (q *Queries) claimOf(from proto.PubKey, id uuid.UUID) *api.ItemClaim {
	return q.Claims.Of(claims.Key{From: from, ID: id}, time.Now())
}
