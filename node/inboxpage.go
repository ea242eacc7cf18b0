package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
)

// Inbox paging. An answer of GET /v1/inbox holds at most maxInboxAnswer
// items and maxInboxBytes of their envelopes (at least one item), so a
// client reads an inbox of any size page by page with bounded memory at
// both ends; Next in the answer continues it.

const (
	// maxInboxAnswer bounds the items of one inbox answer, and is the
	// window when no limit is given.
	maxInboxAnswer = 1000
	// maxInboxBytes bounds the envelope bytes of one answer. Rendered as
	// JSON a body grows by at most 6 times (every byte a \u00XX escape),
	// so an answer stays under 32 MiB, below the 64 MiB a control client
	// reads of one answer.
	maxInboxBytes = 4 << 20
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
func (n *Node) InboxPage(ctx context.Context, q api.InboxQuery) (*api.Inbox, error) {
	return n.inboxPage(ctx, q, true)
}

// inboxPage is InboxPage; client says a local client (the agent) asks,
// whose reads and waits its presence follows, rather than the status page.
func (n *Node) inboxPage(ctx context.Context, q api.InboxQuery, client bool) (*api.Inbox, error) {
	match, since, err := n.inboxMatch(q.Filter)
	if err != nil {
		return nil, err
	}
	sq := history.InboxPageQuery{UnreadOnly: !q.All, Limit: maxInboxAnswer, MaxBytes: maxInboxBytes, NeedWaking: q.Wait,
		Since: since, Match: match}
	switch q.Cursor {
	case "":
		sq.Newest = q.Limit
		if sq.Newest <= 0 {
			sq.Newest = maxInboxAnswer
		}
	case api.CursorStart:
		sq.FromStart = true
	default:
		c, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || c == nil {
			return nil, badRequest("cursor %q: not the next of an earlier inbox answer", q.Cursor)
		}
		sq.After = c
	}
	if q.Cursor != "" && q.Limit > 0 {
		sq.Limit = min(q.Limit, maxInboxAnswer)
	}
	var deadline <-chan time.Time
	if q.Wait {
		t := time.NewTimer(q.Timeout)
		defer t.Stop()
		deadline = t.C
		if client {
			// A client waiting on the inbox: the agent is away (presence).
			defer n.own.ClientWaiting()()
		}
	}
	for {
		// Take the notifier before looking, so an item arriving in between
		// still wakes us.
		woke := n.inbox.wait()
		p, err := n.store.InboxPage(sq)
		if errors.Is(err, history.ErrBadCursor) {
			return nil, badRequest("cursor %q: not the next of an earlier inbox answer", q.Cursor)
		}
		if err != nil {
			return nil, err
		}
		render := func() *api.Inbox {
			out := n.renderItems(p.Items)
			out.Next = encodeCursor(p.Next)
			return out
		}
		if !q.Wait || p.Waking {
			if client {
				// A read, or a wait that ends with work: the agent is at it.
				n.own.Acted()
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
		case <-n.ctx.Done():
			return nil, fmt.Errorf("meshd is shutting down")
		}
	}
}
