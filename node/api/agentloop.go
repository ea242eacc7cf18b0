package api

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Agent-loop endpoints:
//
//	POST /v1/inbox/{id}/claim?from=PEER  claim one unread item for a worker   body: Claim
//	POST /v1/inbox/claim                 claim up to Count unread items       body: ClaimNext
//	POST /v1/reply                       answer an inbox item where it came from  body: Reply
//	GET  /v1/search?q=TEXT&limit=N       held inbox items whose text holds TEXT
//	GET  /v1/requests?pending=1&limit=N  requests this node sent, with their latest status
//	GET  /v1/conversation?peer=P&since=D&limit=N
//	                                     the DMs, requests and responses between
//	                                     this node and peer P, both ways, oldest first
//
// GET /v1/inbox also takes the filters of [InboxFilter]: from, kind,
// channel and since.

// Claim limits.
const (
	DefaultLease = 5 * time.Minute
	MaxLease     = 24 * time.Hour
	// MaxClaimCount bounds the items one POST /v1/inbox/claim takes.
	MaxClaimCount = 1000
)

// ItemClaim is a worker's hold on an inbox item: no other worker can
// claim it until Until, unless it is read first.
type ItemClaim struct {
	Worker string    `json:"worker,omitempty"`
	Until  time.Time `json:"until"`
}

// Claim is the body of POST /v1/inbox/{id}/claim.
type Claim struct {
	// Worker names the claimant; the same worker claiming again renews
	// its lease. Empty: an anonymous claim, which nobody renews.
	Worker string `json:"worker,omitempty"`
	// Lease is how long the claim holds, such as "5m" (default 5m, at
	// most 24h).
	Lease string `json:"lease,omitempty"`
	// Release gives the claim up (only the worker that holds it).
	Release bool `json:"release,omitempty"`
}

// InboxFilter narrows inbox listings, claims and searches. Empty fields
// keep everything.
type InboxFilter struct {
	From    string `json:"from,omitempty"`    // a member's name, fingerprint or key
	Kind    string `json:"kind,omitempty"`    // message, request, response or delivery_failed
	Channel string `json:"channel,omitempty"` // a channel name (with or without '#'); "@" for direct items only
	Since   string `json:"since,omitempty"`   // delivered at or after: see [ParseSince]
}

func (f InboxFilter) values(v url.Values) {
	for k, s := range map[string]string{"from": f.From, "kind": f.Kind, "channel": f.Channel, "since": f.Since} {
		if s != "" {
			v.Set(k, s)
		}
	}
}

// ClaimNext is the body of POST /v1/inbox/claim: take up to Count unread
// items that pass Filter and no other worker holds, oldest first.
type ClaimNext struct {
	Count  int    `json:"count"`
	Worker string `json:"worker,omitempty"`
	Lease  string `json:"lease,omitempty"`
	// Wait blocks, up to Timeout (default 30s, at most 10m), until at
	// least one item could be claimed.
	Wait    bool   `json:"wait,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	InboxFilter
}

// Reply is the body of POST /v1/reply: a message in answer to inbox item
// ID, to its channel, or as a DM to its sender.
type Reply struct {
	ID   string `json:"id"`
	From string `json:"from,omitempty"` // the item's sender, when several share ID
	Body string `json:"body"`
	// Direct sends a channel item's answer as a DM to its sender.
	Direct bool `json:"direct,omitempty"`
}

// SentRequest is one request this node sent, with its latest status: the
// newest response's status (accepted, progress, rejected, completed,
// failed), or while none came the delivery state (queued, delivered,
// expired, refused).
type SentRequest struct {
	ID        string    `json:"id"`
	RequestID string    `json:"request_id"`
	To        Party     `json:"to"`
	Intent    string    `json:"intent,omitempty"`
	Sent      time.Time `json:"sent"`
	// AgeSeconds is how long ago it was sent.
	AgeSeconds float64 `json:"age_seconds"`
	Delivery   string  `json:"delivery"`
	Status     string  `json:"status"`
	// Pending: no final answer (rejected, completed, failed) came, and
	// the request was not given up (expired, refused).
	Pending bool `json:"pending"`
	// Answered is when the latest response arrived; Result its result.
	Answered  time.Time `json:"answered,omitzero"`
	Responses int       `json:"responses"`
	Result    any       `json:"result,omitempty"`
}

// SentRequests is the answer to GET /v1/requests, newest first.
type SentRequests struct {
	Requests []SentRequest `json:"requests"`
}

// ConversationEntry is one envelope of a conversation. Out marks what this
// node sent; Delivery is its delivery state then.
type ConversationEntry struct {
	Item
	Out bool `json:"out,omitempty"`
}

// Conversation is the answer to GET /v1/conversation.
type Conversation struct {
	Peer    Party               `json:"peer"`
	Entries []ConversationEntry `json:"entries"`
}

// Claim calls POST /v1/inbox/{id}/claim.
func (c *Client) Claim(ctx context.Context, id, from string, in Claim) (*Item, error) {
	var out Item
	p := "/v1/inbox/" + url.PathEscape(id) + "/claim"
	if from != "" {
		p += "?from=" + url.QueryEscape(from)
	}
	return &out, c.postJSON(ctx, p, in, &out)
}

// ClaimNext calls POST /v1/inbox/claim. With Wait, ctx must outlive the
// timeout.
func (c *Client) ClaimNext(ctx context.Context, in ClaimNext) (*Inbox, error) {
	var out Inbox
	return &out, c.postJSON(ctx, "/v1/inbox/claim", in, &out)
}

// Reply calls POST /v1/reply.
func (c *Client) Reply(ctx context.Context, in Reply) (*Sent, error) {
	var out Sent
	return &out, c.postJSON(ctx, "/v1/reply", in, &out)
}

// Search calls GET /v1/search.
func (c *Client) Search(ctx context.Context, text string, limit int, f InboxFilter) (*Inbox, error) {
	v := url.Values{}
	v.Set("q", text)
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	f.values(v)
	var out Inbox
	return &out, c.Get(ctx, "/v1/search?"+v.Encode(), &out)
}

// Requests calls GET /v1/requests.
func (c *Client) Requests(ctx context.Context, pending bool, limit int) (*SentRequests, error) {
	v := url.Values{}
	if pending {
		v.Set("pending", "1")
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out SentRequests
	return &out, c.Get(ctx, "/v1/requests?"+v.Encode(), &out)
}

// Conversation calls GET /v1/conversation.
func (c *Client) Conversation(ctx context.Context, peer, since string, limit int) (*Conversation, error) {
	v := url.Values{}
	v.Set("peer", peer)
	if since != "" {
		v.Set("since", since)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out Conversation
	return &out, c.Get(ctx, "/v1/conversation?"+v.Encode(), &out)
}
