package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meshd/meshd/proto"
)

// Message-plane endpoints (see the package doc for the status endpoints):
//
//	GET  /v1/channels                 channels this node holds, with subscription state
//	GET  /v1/channels/{name}          one channel
//	POST /v1/channels                 create a channel (admins only)        body: CreateChannel
//	POST /v1/channels/{name}/policy   sign the next policy version (admins) body: UpdateChannel
//	POST /v1/channels/{name}/delete   sign the channel's tombstone (admins)
//	POST /v1/channels/{name}/draft    sign the next version, not applied    body: DraftChannel
//	POST /v1/channels/publish         publish a co-signed policy document   body: PublishChannel
//	GET  /v1/blocks                   the members this node blocks
//	POST /v1/blocks                   block a member                        body: SetBlock
//	DELETE /v1/blocks/{member}        unblock a member
//	POST /v1/subscriptions            subscribe, unsubscribe, mute, unmute  body: Subscribe
//	POST /v1/send                     a channel message or a DM             body: Send
//	POST /v1/request                  a Request to a peer                   body: Request
//	POST /v1/respond                  a Response to a received Request      body: Respond
//	GET  /v1/inbox?all=1&wait=1&timeout=30s&limit=N
//	                                  inbox items (unread only unless all); with wait, block
//	                                  until at least one unread waking item exists or the
//	                                  timeout passes (then answer with what there is)
//	POST /v1/inbox/{id}/read          mark an item read
//	GET  /v1/events                   text/event-stream of inbox items as delivered:
//	                                  "event: item" with one Item as JSON per event;
//	                                  "event: lagged" when the reader fell 256 items behind
//	GET  /v1/presence                 the presence table
//	POST /v1/presence                 override our own presence for a while body: SetPresence

// Send is the body of POST /v1/send. To is "#channel" for a channel, or a
// peer (key, fingerprint or roster name, optionally with '@') for a DM.
type Send struct {
	To        string `json:"to"`
	Body      string `json:"body"`
	InReplyTo string `json:"in_reply_to,omitempty"` // envelope id
	// Attachments are absolute paths of local files the daemon reads and
	// copies into its blob store; the message lists each (PROTOCOL.md §6.8).
	Attachments []string `json:"attachments,omitempty"`
}

// Attachment is a file an item lists: GET /v1/inbox and the events.
type Attachment struct {
	Name      string `json:"name"`
	Size      uint64 `json:"size"`
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	// Path is the verified local file, once present; empty until then.
	Path string `json:"path,omitempty"`
}

// Fetch is the body of POST /v1/fetch: fetch the attachments of the
// envelope ID (all, or the one named Name) and wait until they are
// present.
type Fetch struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Fetched is the answer to POST /v1/fetch.
type Fetched struct {
	Attachments []Attachment `json:"attachments"`
}

// Request is the body of POST /v1/request.
type Request struct {
	To      string          `json:"to"`
	Intent  string          `json:"intent"`
	Params  json.RawMessage `json:"params,omitempty"`
	ReplyTo string          `json:"reply_to,omitempty"` // parent request id: a follow-up, hop = parent hop + 1
	// Attachments are the request's input files, as in [Send].
	Attachments []string `json:"attachments,omitempty"`
}

// Respond is the body of POST /v1/respond.
type Respond struct {
	RequestID string `json:"request_id"`
	// To names the requester (a member's name, fingerprint or key) when
	// several members sent a request with this id; empty otherwise.
	To     string          `json:"to,omitempty"`
	Status string          `json:"status"` // accepted, rejected, completed or failed
	Result json.RawMessage `json:"result,omitempty"`
	// Attachments are the answer's result files, as in [Send].
	Attachments []string `json:"attachments,omitempty"`
}

// Sent is the answer to send, request and respond.
type Sent struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	To        string   `json:"to"`
	Seq       uint64   `json:"seq"`
	RequestID string   `json:"request_id,omitempty"`
	Hop       *int     `json:"hop,omitempty"`
	SentTo    []string `json:"sent_to"`          // fingerprints of peers it was handed to
	Queued    bool     `json:"queued,omitempty"` // kept for an offline peer
}

// Party names a node in answers.
type Party struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	Name        string       `json:"name,omitempty"`
	Role        string       `json:"role,omitempty"`
	// NameAmbiguous: another member's name looks like Name (older tools
	// let such names into a roster), so show the fingerprint with it.
	NameAmbiguous bool `json:"name_ambiguous,omitempty"`
}

func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPost, path, "application/json", b, out)
}

// Send calls POST /v1/send.
func (c *Client) Send(ctx context.Context, in Send) (*Sent, error) {
	var out Sent
	return &out, c.postJSON(ctx, "/v1/send", in, &out)
}

// Request calls POST /v1/request.
func (c *Client) Request(ctx context.Context, in Request) (*Sent, error) {
	var out Sent
	return &out, c.postJSON(ctx, "/v1/request", in, &out)
}

// Respond calls POST /v1/respond.
func (c *Client) Respond(ctx context.Context, in Respond) (*Sent, error) {
	var out Sent
	return &out, c.postJSON(ctx, "/v1/respond", in, &out)
}

// Delivery is what became of one envelope this node sent: GET
// /v1/sent/{id}, and one row of GET /v1/sent.
type Delivery struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"` // message, request or response
	To      string    `json:"to"`   // "#channel" or "@name"
	Sent    time.Time `json:"sent"`
	Expires time.Time `json:"expires"`
	// Recipients holds one entry per recipient of a DM, Request or
	// Response (one, today).
	Recipients []DeliveryRecipient `json:"recipients,omitempty"`
	// LinkedReaders and AckedReaders, for a channel Message: how many
	// readers it was handed to on a link, and how many acknowledged it.
	LinkedReaders *int `json:"linked_readers,omitempty"`
	AckedReaders  *int `json:"acked_readers,omitempty"`
}

// DeliveryRecipient is a sent envelope's state at one recipient.
type DeliveryRecipient struct {
	Party
	// State is queued (kept and re-sent, not yet acknowledged),
	// delivered (acknowledged: stored durably by the recipient), expired
	// (never acknowledged within its life; no longer sent) or refused
	// (given up by this node before it expired; see Reason).
	State  string    `json:"state"`
	At     time.Time `json:"at,omitempty"` // when State was reached; zero while queued
	Reason string    `json:"reason,omitempty"`
}

// SentList is the answer to GET /v1/sent.
type SentList struct {
	Items []Delivery `json:"items"`
}

// SentQuery selects GET /v1/sent rows.
type SentQuery struct {
	Pending bool // only what is still queued
	Limit   int  // newest Limit rows; 0: 100
}

// SentList calls GET /v1/sent.
func (c *Client) SentList(ctx context.Context, q SentQuery) (*SentList, error) {
	v := url.Values{}
	if q.Pending {
		v.Set("pending", "1")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out SentList
	return &out, c.Get(ctx, "/v1/sent?"+v.Encode(), &out)
}

// Delivery calls GET /v1/sent/{id}.
func (c *Client) Delivery(ctx context.Context, id string) (*Delivery, error) {
	var out Delivery
	return &out, c.Get(ctx, "/v1/sent/"+url.PathEscape(id), &out)
}

// Fetch calls POST /v1/fetch: it returns once the attachments are
// present, or when ctx ends.
func (c *Client) Fetch(ctx context.Context, in Fetch) (*Fetched, error) {
	var out Fetched
	return &out, c.postJSON(ctx, "/v1/fetch", in, &out)
}
