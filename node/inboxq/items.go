package inboxq

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/roster"
)

// Inbox lists inbox items (unread only unless all): the first page of
// the newest limit (1000 if 0). With wait it blocks, up to timeout or
// until ctx ends, until an unread waking item exists.
func (q *Queries) Inbox(ctx context.Context, all bool, limit int, wait bool, timeout time.Duration) (*api.Inbox, error) {
	return q.InboxPage(ctx, api.InboxQuery{All: all, Limit: limit, Wait: wait, Timeout: timeout})
}

// MarkRead marks inbox item id read and returns it. Envelopes are
// (sender, id): should two senders' items share the id, the caller must
// name the sender (from: a name, fingerprint or key), and an id without
// one is refused, naming the candidates by sender; a reused id must not
// let one sender mark another's item read.
func (q *Queries) MarkRead(id uuid.UUID, from string) (api.Item, error) {
	q.host.Acted()
	item, err := q.item(id, from, "name the sender: meshctl read "+id.String()+" --from PEER")
	if err != nil {
		return api.Item{}, err
	}
	if err := q.store.MarkRead(item.From, id); err != nil && !errors.Is(err, history.ErrNotFound) {
		return api.Item{}, err
	}
	q.Claims.ReleaseRead(claims.Key{From: item.From, ID: id})
	q.host.Read(item.From, id)
	it, err := q.store.InboxEntry(item.From, id)
	if err != nil {
		return api.Item{}, err
	}
	return q.Render(it)
}

// Item finds inbox item id, of sender from (a member's name, fingerprint
// or key; "" for any) when several share it.
func (q *Queries) Item(id uuid.UUID, from string) (history.InboxItem, error) {
	return q.item(id, from, "name the sender with --from PEER")
}

// item is Item; hint is the fix an ambiguous id gets.
func (q *Queries) item(id uuid.UUID, from, hint string) (history.InboxItem, error) {
	items, err := q.store.InboxByID(id)
	if err != nil {
		return history.InboxItem{}, err
	}
	if len(items) == 0 {
		return history.InboxItem{}, apierr.NotFound("list items with: meshctl inbox --all", "no inbox item %s", id)
	}
	if strings.TrimPrefix(strings.TrimSpace(from), "@") != "" {
		m, err := q.host.ResolvePeer(from)
		if err != nil {
			return history.InboxItem{}, err
		}
		kept := items[:0]
		for _, it := range items {
			if it.From.Equal(m.Key) {
				kept = append(kept, it)
			}
		}
		if len(kept) == 0 {
			return history.InboxItem{}, apierr.NotFound("list items with: meshctl inbox --all", "no inbox item %s from %s", id, nameOf(m))
		}
		items = kept
	}
	if len(items) > 1 {
		var s []string
		for _, it := range items {
			s = append(s, q.label(it.From))
		}
		q.host.Count(ReadAmbiguous)
		return history.InboxItem{}, apierr.New(http.StatusConflict, hint,
			"inbox item id %s is ambiguous: %d senders' items share it: %s", id, len(items), strings.Join(s, ", "))
	}
	return items[0], nil
}

// nameOf is a member's name, or its fingerprint when it has none.
func nameOf(m roster.Member) string {
	if m.Name != "" {
		return m.Name
	}
	return m.Key.Fingerprint()
}
