package api

import (
	"context"
	"net/url"
	"time"
)

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

// Subscribe is the body of POST /v1/subscriptions.
type Subscribe struct {
	Channel string `json:"channel"` // name, with or without '#'
	State   string `json:"state"`   // subscribed, unsubscribed or muted
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
