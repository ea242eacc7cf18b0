package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// CardIntent is one intent of an agent card, as JSON.
type CardIntent struct {
	Name    string `json:"name"`
	Summary string `json:"summary,omitempty"`
	// ParamsSchema is a JSON Schema (an object) for the request's params.
	ParamsSchema json.RawMessage `json:"params_schema,omitempty"`
}

// CardInput is the body of PUT /v1/card: this node's card as the
// operator writes it (meshctl card set --file card.json).
type CardInput struct {
	Description string       `json:"description,omitempty"`
	Intents     []CardIntent `json:"intents,omitempty"`
	Tags        []string     `json:"tags,omitempty"`
}

// Card is one member's agent card, with its presence.
type Card struct {
	Party
	Version     uint64       `json:"version"`
	Description string       `json:"description,omitempty"`
	Intents     []CardIntent `json:"intents"`
	Tags        []string     `json:"tags"`
	// Presence is the member's effective presence state (online, away,
	// offline).
	Presence string `json:"presence"`
	Self     bool   `json:"self,omitempty"`
	// Cleared says the member cleared its card: it serves nothing.
	Cleared bool `json:"cleared,omitempty"`
}

// Cards is the answer to GET /v1/cards: the members that publish a card,
// online first, then away, then offline, by name within each.
type Cards struct {
	Cards []Card `json:"cards"`
}

// Cards lists the members' cards; with intent set, only those that list it.
func (c *Client) Cards(ctx context.Context, intent string) (*Cards, error) {
	var out Cards
	p := "/v1/cards"
	if intent != "" {
		p += "?intent=" + url.QueryEscape(intent)
	}
	return &out, c.Get(ctx, p, &out)
}

// CardOf returns one member's card (key, fingerprint or roster name; ""
// is this node).
func (c *Client) CardOf(ctx context.Context, peer string) (*Card, error) {
	var out Card
	p := "/v1/card"
	if peer != "" {
		p = "/v1/cards/" + url.PathEscape(peer)
	}
	return &out, c.Get(ctx, p, &out)
}

// SetCard signs and publishes this node's card.
func (c *Client) SetCard(ctx context.Context, in CardInput) (*Card, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var out Card
	return &out, c.Do(ctx, http.MethodPut, "/v1/card", "application/json", b, &out)
}

// ClearCard publishes an empty card: this node serves nothing.
func (c *Client) ClearCard(ctx context.Context) (*Card, error) {
	var out Card
	return &out, c.Do(ctx, http.MethodDelete, "/v1/card", "", nil, &out)
}

// Serves reports whether the card lists intent.
func (c *Card) Serves(intent string) bool {
	for _, it := range c.Intents {
		if it.Name == intent {
			return true
		}
	}
	return false
}

// Cancel is the body of POST /v1/cancel: ask the peer working on one of
// this node's requests to stop.
type Cancel struct {
	RequestID string `json:"request_id"`
	// To names the peer; empty: the sender of an answer to the request.
	To string `json:"to,omitempty"`
}

// Cancel calls POST /v1/cancel.
func (c *Client) Cancel(ctx context.Context, in Cancel) (*Sent, error) {
	var out Sent
	return &out, c.postJSON(ctx, "/v1/cancel", in, &out)
}

// RequestAny is the body of POST /v1/request/any: ask whoever can. The
// candidates are the members whose card lists Intent, online first,
// then away (by name within each; offline members are not asked); each
// is asked in turn until one accepts, or answers in full, within the
// accept timeout. A rejection, or no answer in time, moves on.
type RequestAny struct {
	Intent  string          `json:"intent"`
	Params  json.RawMessage `json:"params,omitempty"`
	ReplyTo string          `json:"reply_to,omitempty"`
	// AcceptTimeoutSeconds is how long each candidate has to answer:
	// 0 means [DefaultAcceptTimeout]; at most [MaxAcceptTimeout].
	AcceptTimeoutSeconds float64 `json:"accept_timeout_seconds,omitempty"`
}

const (
	// DefaultAcceptTimeout is how long request-any waits for each
	// candidate by default.
	DefaultAcceptTimeout = 30 * time.Second
	// MaxAcceptTimeout bounds the wait for each candidate.
	MaxAcceptTimeout = 5 * time.Minute
	// MaxAnyCandidates bounds the members one request-any asks.
	MaxAnyCandidates = 16
)

// AnyTry is one candidate a request-any asked, and what came of it.
type AnyTry struct {
	Party
	Presence  string `json:"presence"`
	RequestID string `json:"request_id"`
	// Outcome is accepted, progress, completed, failed, rejected or
	// timed_out.
	Outcome string `json:"outcome"`
}

// AnyResult is the answer to POST /v1/request/any.
type AnyResult struct {
	// Taken says a member took the request: Peer, Request and Answer
	// are set.
	Taken   bool   `json:"taken"`
	Peer    *Party `json:"peer,omitempty"`
	Request *Sent  `json:"request,omitempty"`
	// Answer is the first answer of the member that took it; later
	// answers arrive in the inbox.
	Answer *Item    `json:"answer,omitempty"`
	Tried  []AnyTry `json:"tried"`
}

// RequestAny calls POST /v1/request/any. It blocks while the candidates
// are asked, up to MaxAnyCandidates times the accept timeout: ctx bounds
// it.
func (c *Client) RequestAny(ctx context.Context, in RequestAny) (*AnyResult, error) {
	var out AnyResult
	return &out, c.postJSON(ctx, "/v1/request/any", in, &out)
}
