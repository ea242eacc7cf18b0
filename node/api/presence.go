package api

import (
	"context"
	"time"
)

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
