package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Item is one inbox item.
type Item struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	From        Party           `json:"from"`
	To          string          `json:"to"` // "#channel" or "@name"
	Channel     string          `json:"channel,omitempty"`
	Priority    string          `json:"priority"` // high, normal or low
	Wakes       bool            `json:"wakes"`
	Read        bool            `json:"read"`
	Sent        time.Time       `json:"sent"`
	Delivered   time.Time       `json:"delivered"`
	Expires     time.Time       `json:"expires"`
	Expired     bool            `json:"expired,omitempty"`
	FromHistory bool            `json:"from_history,omitempty"`
	Seq         uint64          `json:"seq"`
	Body        string          `json:"body,omitempty"`
	InReplyTo   string          `json:"in_reply_to,omitempty"`
	RequestID   string          `json:"request_id,omitempty"`
	Intent      string          `json:"intent,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	ReplyTo     string          `json:"reply_to,omitempty"`
	Hop         *int            `json:"hop,omitempty"`
	Status      string          `json:"status,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	// Attachments lists the files beside the envelope (PROTOCOL.md §6.8),
	// each with its local path once fetched and verified.
	Attachments []Attachment `json:"attachments,omitempty"`
	// For a delivery_failed item (kind): an envelope of this node's that
	// will never reach To. FailedKind is its kind (message, request or
	// response), Delivery "expired" or "refused", Reason why it was
	// refused; ID, Sent, Body, RequestID and the rest are the envelope's.
	FailedKind string `json:"failed_kind,omitempty"`
	Delivery   string `json:"delivery,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Claim is set while a worker holds the item (POST
	// /v1/inbox/{id}/claim); claims live in meshd's memory only.
	Claim *ItemClaim `json:"claim,omitempty"`
	// For a subagent_result item (kind), local only: the subagent's id
	// and summary; its result, if any, is in Result.
	SubagentID string `json:"subagent_id,omitempty"`
	Summary    string `json:"summary,omitempty"`
}

// KindDeliveryFailed is the Item kind that tells a sender an envelope of
// its own was not delivered.
const KindDeliveryFailed = "delivery_failed"

// Inbox is the answer to GET /v1/inbox.
type Inbox struct {
	Items []Item `json:"items"`
	// TimedOut is set when a wait ended without a waking item.
	TimedOut bool `json:"timed_out,omitempty"`
	// Next, when set, is the cursor of the page that follows: more items
	// passing the query come after the last of Items.
	Next string `json:"next,omitempty"`
}

// CursorStart is the [InboxQuery] cursor that starts at the oldest item.
const CursorStart = "start"

// InboxQuery selects inbox items.
type InboxQuery struct {
	All     bool          // include read items
	Wait    bool          // block until an unread waking item exists
	Timeout time.Duration // for Wait; 0 means 30 s
	// Limit without Cursor: list the newest Limit items (0: 1000); with
	// it: at most Limit items in this answer (0: 1000).
	Limit int
	// Cursor continues after an earlier answer's Next; [CursorStart]
	// starts at the oldest item. An answer holds at most 1000 items and
	// about 4 MiB of envelopes: follow Next for the rest, or use
	// [Client.InboxPages].
	Cursor string
	// Filter keeps the items that pass it.
	Filter InboxFilter
}

// Inbox calls GET /v1/inbox. With Wait, ctx must outlive the timeout.
func (c *Client) Inbox(ctx context.Context, q InboxQuery) (*Inbox, error) {
	v := url.Values{}
	if q.All {
		v.Set("all", "1")
	}
	if q.Wait {
		v.Set("wait", "1")
		if q.Timeout > 0 {
			v.Set("timeout", q.Timeout.String())
		}
	}
	if q.Limit > 0 {
		v.Set("limit", itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	q.Filter.values(v)
	var out Inbox
	return &out, c.Get(ctx, "/v1/inbox?"+v.Encode(), &out)
}

// InboxPages lists the items q selects page by page, calling page for
// each answer in turn (the first one made with q, waiting if q.Wait),
// until an answer has no Next, page returns an error, or, when q.Limit
// is set without q.Cursor, q.Limit items have been passed. The first
// call is bounded by first (with Wait, longer than q.Timeout), each
// later one by [DefaultTimeout]. Memory stays at one page however large
// the inbox. Items delivered while it pages are listed too.
func (c *Client) InboxPages(ctx context.Context, q InboxQuery, first time.Duration, page func(*Inbox) error) error {
	want := 0
	if q.Cursor == "" && q.Limit > 0 {
		want = q.Limit
	}
	got := 0
	bound := first
	for {
		cctx, cancel := context.WithTimeout(ctx, bound)
		in, err := c.Inbox(cctx, q)
		cancel()
		if err != nil {
			return err
		}
		bound = DefaultTimeout
		if want > 0 && got+len(in.Items) >= want {
			in.Items = in.Items[:want-got]
			in.Next = ""
		}
		got += len(in.Items)
		if err := page(in); err != nil {
			return err
		}
		if in.Next == "" {
			return nil
		}
		q.Cursor, q.Wait = in.Next, false
		if want > 0 {
			q.Limit = min(want-got, 1000)
		}
	}
}

// MarkRead calls POST /v1/inbox/{id}/read and returns the item.
func (c *Client) MarkRead(ctx context.Context, id string) (*Item, error) {
	return c.MarkReadFrom(ctx, id, "")
}

// MarkReadFrom is MarkRead of the item of sender from (a member's name,
// fingerprint or key), for an id that several senders' items share;
// empty from is MarkRead.
func (c *Client) MarkReadFrom(ctx context.Context, id, from string) (*Item, error) {
	var out Item
	path := "/v1/inbox/" + url.PathEscape(id) + "/read"
	if from != "" {
		path += "?from=" + url.QueryEscape(from)
	}
	return &out, c.Do(ctx, http.MethodPost, path, "", nil, &out)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
