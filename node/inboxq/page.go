package inboxq

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
)

// Inbox paging. An answer of GET /v1/inbox holds at most MaxAnswer
// items and MaxBytes of their envelopes (at least one item), so a
// client reads an inbox of any size page by page with bounded memory at
// both ends; Next in the answer continues it.

const (
	// MaxAnswer bounds the items of one inbox answer, and is the
	// window when no limit is given.
	MaxAnswer = 1000
	// MaxBytes bounds the envelope bytes of one answer. Rendered as
	// JSON a body grows by at most 6 times (every byte a \u00XX escape),
	// so an answer stays under 32 MiB, below the 64 MiB a control client
	// reads of one answer.
	MaxBytes = 4 << 20
)

// encodeCursor renders a store cursor for the API.
func encodeCursor(c []byte) string {
	if c == nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(c)
}

// InboxPage lists one page of inbox items (unread only unless q.All),
// oldest first. Without q.Cursor the page starts at the q.Limit-th newest
// item (the 1000th if 0); with it, after the item the cursor names
// (api.CursorStart: at the oldest), holding at most q.Limit items. The
// answer's Next continues it. With q.Wait it blocks, up to q.Timeout or
// until ctx ends, until an unread waking item exists from the page's
// start on.
func (q *Queries) InboxPage(ctx context.Context, in api.InboxQuery) (*api.Inbox, error) {
	return q.inboxPage(ctx, in, true)
}

// RecentItems returns up to limit inbox items, read or not, oldest first.
// It marks nothing read.
func (q *Queries) RecentItems(limit int) ([]api.Item, error) {
	if limit <= 0 {
		return []api.Item{}, nil
	}
	// Not as a client: viewing the page says nothing of the agent.
	in, err := q.inboxPage(context.Background(), api.InboxQuery{All: true, Limit: limit}, false)
	if err != nil {
		return nil, err
	}
	return in.Items, nil // the store answers oldest first
}

// inboxPage is InboxPage; client says a local client (the agent) asks,
// whose reads and waits its presence follows, rather than the status page.
func (q *Queries) inboxPage(ctx context.Context, in api.InboxQuery, client bool) (*api.Inbox, error) {
	match, since, err := q.Match(in.Filter)
	if err != nil {
		return nil, err
	}
	sq := history.InboxPageQuery{UnreadOnly: !in.All, Limit: MaxAnswer, MaxBytes: MaxBytes, NeedWaking: in.Wait,
		Since: since, Match: match}
	switch in.Cursor {
	case "":
		sq.Newest = in.Limit
		if sq.Newest <= 0 {
			sq.Newest = MaxAnswer
		}
	case api.CursorStart:
		sq.FromStart = true
	default:
		c, err := base64.RawURLEncoding.DecodeString(in.Cursor)
		if err != nil || c == nil {
			return nil, apierr.BadRequest("cursor %q: not the next of an earlier inbox answer", in.Cursor)
		}
		sq.After = c
	}
	if in.Cursor != "" && in.Limit > 0 {
		sq.Limit = min(in.Limit, MaxAnswer)
	}
	var deadline <-chan time.Time
	if in.Wait {
		t := time.NewTimer(in.Timeout)
		defer t.Stop()
		deadline = t.C
		if client {
			// A client waiting on the inbox: the agent is away (presence).
			defer q.host.ClientWaiting()()
		}
	}
	for {
		// Take the notifier before looking, so an item arriving in between
		// still wakes us.
		woke := q.Woken()
		p, err := q.store.InboxPage(sq)
		if errors.Is(err, history.ErrBadCursor) {
			return nil, apierr.BadRequest("cursor %q: not the next of an earlier inbox answer", in.Cursor)
		}
		if err != nil {
			return nil, err
		}
		render := func() *api.Inbox {
			out := q.renderItems(p.Items)
			out.Next = encodeCursor(p.Next)
			return out
		}
		if !in.Wait || p.Waking {
			if client {
				// A read, or a wait that ends with work: the agent is at it.
				q.host.Acted()
			}
			return render(), nil
		}
		select {
		case <-woke:
		case <-deadline:
			out := render()
			out.TimedOut = true
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.done:
			return nil, fmt.Errorf("meshd is shutting down")
		}
	}
}
