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

// Principal texts for channel ACLs: "role:observer" .. "role:admin", a key
// "ed25519:...", a fingerprint, or a roster name.

// CreateChannel is the body of POST /v1/channels.
type CreateChannel struct {
	Name      string   `json:"name"`
	Readers   []string `json:"readers,omitempty"`
	Writers   []string `json:"writers,omitempty"`
	NoHistory bool     `json:"no_history,omitempty"`
	// RetentionHours and RetentionMessages set the channel's retention;
	// 0 leaves the default (72 h, 10,000 messages).
	RetentionHours    int `json:"retention_hours,omitempty"`
	RetentionMessages int `json:"retention_messages,omitempty"`
}

// Channel describes a channel in answers.
type Channel struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	Version           uint64   `json:"version"`
	Readers           []string `json:"readers"`
	Writers           []string `json:"writers"`
	Admins            []string `json:"admins"`
	AllowHistoryFetch bool     `json:"allow_history_fetch"`
	RetentionHours    int      `json:"retention_hours"`
	RetentionMessages int      `json:"retention_messages"`
	Subscription      string   `json:"subscription"` // unsubscribed, subscribed or muted
	CanRead           bool     `json:"can_read"`
	CanWrite          bool     `json:"can_write"`
	// Deleted: the held version is a tombstone (no readers, no writers).
	Deleted bool `json:"deleted,omitempty"`
	// Versions is the policy's history as this node saw it, oldest
	// first; only GET /v1/channels/{name} fills it.
	Versions []ChannelVersion `json:"versions,omitempty"`
}

// ChannelVersion is one policy version a node accepted.
type ChannelVersion struct {
	Version  uint64    `json:"version"`
	Made     time.Time `json:"made"`    // the policy's timestamp
	Signers  []string  `json:"signers"` // roster labels, or fingerprints
	Readers  []string  `json:"readers"`
	Writers  []string  `json:"writers"`
	History  bool      `json:"allow_history_fetch"`
	Hours    int       `json:"retention_hours"`
	Messages int       `json:"retention_messages"`
	Deleted  bool      `json:"deleted,omitempty"`
	Accepted time.Time `json:"accepted"` // when this node accepted it
}

// UpdateChannel is the body of POST /v1/channels/{name}/policy: the
// fields to change in the next version; an absent field keeps its value.
type UpdateChannel struct {
	Readers           []string `json:"readers,omitempty"`
	Writers           []string `json:"writers,omitempty"`
	AllowHistoryFetch *bool    `json:"allow_history_fetch,omitempty"`
	// RetentionHours and RetentionMessages: 0 sets the default.
	RetentionHours    *int `json:"retention_hours,omitempty"`
	RetentionMessages *int `json:"retention_messages,omitempty"`
}

// DraftChannel is the body of POST /v1/channels/{name}/draft: the
// changes of an [UpdateChannel], or Delete for the tombstone.
type DraftChannel struct {
	UpdateChannel
	Delete bool `json:"delete,omitempty"`
}

// PolicyDraft is the answer to POST /v1/channels/{name}/draft: the next
// policy version, signed by this node and not applied, for other admins
// to co-sign before POST /v1/channels/publish.
type PolicyDraft struct {
	Channel    string `json:"channel"`
	ID         string `json:"id"`
	Version    uint64 `json:"version"`
	Document   []byte `json:"document"`   // the signed policy document (PROTOCOL.md §11), base64 in JSON
	Signatures int    `json:"signatures"` // admin signatures it carries
	Required   int    `json:"required"`   // admin signatures it needs: the roster's quorum for an edit
}

// PublishChannel is the body of POST /v1/channels/publish.
type PublishChannel struct {
	Document []byte `json:"document"` // a signed policy document, base64 in JSON
}

// Channels is the answer to GET /v1/channels.
type Channels struct {
	Channels []Channel `json:"channels"`
}

// Block is a member this node blocks, in answers of /v1/blocks.
type Block struct {
	Key         string    `json:"key"`
	Fingerprint string    `json:"fingerprint"`
	Name        string    `json:"name,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	// Blocked is the member's state after POST or DELETE /v1/blocks.
	Blocked bool `json:"blocked"`
}

// Blocks is the answer to GET /v1/blocks.
type Blocks struct {
	Blocks []Block `json:"blocks"`
}

// SetBlock is the body of POST /v1/blocks.
type SetBlock struct {
	Member string `json:"member"` // key, fingerprint or roster name
}

// Subscribe is the body of POST /v1/subscriptions.
type Subscribe struct {
	Channel string `json:"channel"` // name, with or without '#'
	State   string `json:"state"`   // subscribed, unsubscribed or muted
}

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

// PresenceEntry is one row of the presence table.
type PresenceEntry struct {
	Party
	State     string    `json:"state"`     // effective: announced, or offline after presence_ttl of silence
	Announced string    `json:"announced"` // what the node last said
	Seq       uint64    `json:"seq"`
	LastHeard time.Time `json:"last_heard"`
	Self      bool      `json:"self,omitempty"`
	// Note is the member's short status note, as it wrote it (escape it
	// before showing it on a terminal).
	Note string `json:"note,omitempty"`
}

// Presence is the answer to GET /v1/presence.
type Presence struct {
	TTLSeconds float64         `json:"ttl_seconds"`
	Entries    []PresenceEntry `json:"entries"`
	// Agent says why this node announces what it does: from its local
	// clients' activity, or a `presence set` override.
	Agent *AgentPresence `json:"agent,omitempty"`
}

// AgentPresence is this node's own presence, derived from what its local
// clients do (docs/AGENTS.md "Presence").
type AgentPresence struct {
	State  string `json:"state"`  // online, away or offline
	Source string `json:"source"` // activity, or override (presence set)
	Reason string `json:"reason"`
	// Waiting is how many clients wait on the inbox now.
	Waiting    int       `json:"waiting"`
	LastSeen   time.Time `json:"last_seen"`               // the last client call
	LastActive time.Time `json:"last_active,omitzero"`    // the last read, send or answer
	Until      time.Time `json:"override_until,omitzero"` // when an override ends
	Note       string    `json:"note,omitempty"`          // the status note announced with it
	NoteUntil  time.Time `json:"note_until,omitzero"`     // when the note ends
	AwayAfter  float64   `json:"away_after_seconds"`      // no client for this long: away (0 never)
	OffAfter   float64   `json:"offline_after_seconds"`   // and then offline (0 never)
}

// SetPresence is the body of POST /v1/presence.
type SetPresence struct {
	// State is online, away or offline, held for ForSeconds (default
	// 1800, at most 604800) instead of the state activity gives; auto
	// ends an override.
	State      string `json:"state,omitempty"`
	ForSeconds int    `json:"for_seconds,omitempty"`
	// Note, when present, sets the status note announced with presence
	// (at most 256 bytes on one line) for ForSeconds; "" clears it. State
	// may then be empty, leaving the state as it is.
	Note *string `json:"note,omitempty"`
}

func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPost, path, "application/json", b, out)
}

// Channels calls GET /v1/channels.
func (c *Client) Channels(ctx context.Context) (*Channels, error) {
	var out Channels
	return &out, c.Get(ctx, "/v1/channels", &out)
}

// Channel calls GET /v1/channels/{name}.
func (c *Client) Channel(ctx context.Context, name string) (*Channel, error) {
	var out Channel
	return &out, c.Get(ctx, "/v1/channels/"+url.PathEscape(name), &out)
}

// DraftChannel calls POST /v1/channels/{name}/draft.
func (c *Client) DraftChannel(ctx context.Context, name string, in DraftChannel) (*PolicyDraft, error) {
	var out PolicyDraft
	return &out, c.postJSON(ctx, "/v1/channels/"+url.PathEscape(name)+"/draft", in, &out)
}

// PublishChannel calls POST /v1/channels/publish.
func (c *Client) PublishChannel(ctx context.Context, doc []byte) (*Channel, error) {
	var out Channel
	return &out, c.postJSON(ctx, "/v1/channels/publish", PublishChannel{Document: doc}, &out)
}

// UpdateChannel calls POST /v1/channels/{name}/policy.
func (c *Client) UpdateChannel(ctx context.Context, name string, in UpdateChannel) (*Channel, error) {
	var out Channel
	return &out, c.postJSON(ctx, "/v1/channels/"+url.PathEscape(name)+"/policy", in, &out)
}

// DeleteChannel calls POST /v1/channels/{name}/delete.
func (c *Client) DeleteChannel(ctx context.Context, name string) (*Channel, error) {
	var out Channel
	return &out, c.postJSON(ctx, "/v1/channels/"+url.PathEscape(name)+"/delete", struct{}{}, &out)
}

// Blocks calls GET /v1/blocks.
func (c *Client) Blocks(ctx context.Context) (*Blocks, error) {
	var out Blocks
	return &out, c.Get(ctx, "/v1/blocks", &out)
}

// Block calls POST /v1/blocks.
func (c *Client) Block(ctx context.Context, member string) (*Block, error) {
	var out Block
	return &out, c.postJSON(ctx, "/v1/blocks", SetBlock{Member: member}, &out)
}

// Unblock calls DELETE /v1/blocks/{member}.
func (c *Client) Unblock(ctx context.Context, member string) (*Block, error) {
	var out Block
	return &out, c.Do(ctx, http.MethodDelete, "/v1/blocks/"+url.PathEscape(member), "", nil, &out)
}

// CreateChannel calls POST /v1/channels.
func (c *Client) CreateChannel(ctx context.Context, in CreateChannel) (*Channel, error) {
	var out Channel
	return &out, c.postJSON(ctx, "/v1/channels", in, &out)
}

// Subscribe calls POST /v1/subscriptions.
func (c *Client) Subscribe(ctx context.Context, in Subscribe) (*Channel, error) {
	var out Channel
	return &out, c.postJSON(ctx, "/v1/subscriptions", in, &out)
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

// Presence calls GET /v1/presence.
func (c *Client) Presence(ctx context.Context) (*Presence, error) {
	var out Presence
	return &out, c.Get(ctx, "/v1/presence", &out)
}

// SetPresence calls POST /v1/presence.
func (c *Client) SetPresence(ctx context.Context, state string) (*Presence, error) {
	return c.SetPresenceFor(ctx, SetPresence{State: state})
}

// SetPresenceFor calls POST /v1/presence with a duration.
func (c *Client) SetPresenceFor(ctx context.Context, in SetPresence) (*Presence, error) {
	var out Presence
	return &out, c.postJSON(ctx, "/v1/presence", in, &out)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
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
