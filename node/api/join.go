package api

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/meshd/meshd/proto"
)

// CreateInvite is the body of POST /v1/invites.
type CreateInvite struct {
	Role string `json:"role"`           // the role the new member gets
	Name string `json:"name,omitempty"` // its name in the roster; empty: the name it claims when it joins
	// ExpiresSeconds is how long the invite stays usable; 0: a day.
	ExpiresSeconds float64 `json:"expires_seconds,omitempty"`
}

// Invite is one invite an admin's node made. The secret is never shown
// again after creation: the node keeps only its hash.
type Invite struct {
	ID      string    `json:"id"`
	Role    string    `json:"role"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// State is usable, waiting (for other admins to sign the roster
	// update that adds its joiner), used, revoked or expired.
	State  string       `json:"state"`
	Used   *time.Time   `json:"used,omitempty"`
	UsedBy proto.PubKey `json:"used_by,omitzero"`
	// RosterUpdate is the file of the roster update a waiting invite
	// made, for the other admins to sign and publish.
	RosterUpdate string `json:"roster_update,omitempty"`
}

// InviteCreated is the answer to POST /v1/invites: the invite and its
// one-line token, shown this once.
type InviteCreated struct {
	Invite
	Token string `json:"token"`
}

// Invites is the answer to GET /v1/invites.
type Invites struct {
	Invites []Invite `json:"invites"`
}

// PendingNode is a node this node refused because it is not in the
// roster: a candidate for 'meshctl roster add'.
type PendingNode struct {
	Key         proto.PubKey `json:"key"`
	Fingerprint string       `json:"fingerprint"`
	Name        string       `json:"name,omitempty"` // the name it claims
	Address     string       `json:"address,omitempty"`
	FirstSeen   time.Time    `json:"first_seen"`
	LastSeen    time.Time    `json:"last_seen"`
	Attempts    uint64       `json:"attempts"`
}

// Pending is the answer to GET /v1/pending.
type Pending struct {
	Nodes []PendingNode `json:"nodes"`
}

// CreateInvite calls POST /v1/invites.
func (c *Client) CreateInvite(ctx context.Context, in CreateInvite) (*InviteCreated, error) {
	var out InviteCreated
	return &out, c.postJSON(ctx, "/v1/invites", in, &out)
}

// Invites calls GET /v1/invites.
func (c *Client) Invites(ctx context.Context) (*Invites, error) {
	var out Invites
	return &out, c.Get(ctx, "/v1/invites", &out)
}

// RevokeInvite calls POST /v1/invites/{id}/revoke.
func (c *Client) RevokeInvite(ctx context.Context, id string) (*Invite, error) {
	var out Invite
	return &out, c.Do(ctx, http.MethodPost, "/v1/invites/"+url.PathEscape(id)+"/revoke", "", nil, &out)
}

// Pending calls GET /v1/pending.
func (c *Client) Pending(ctx context.Context) (*Pending, error) {
	var out Pending
	return &out, c.Get(ctx, "/v1/pending", &out)
}

// DoctorCheck is one check of GET /v1/doctor.
type DoctorCheck struct {
	Name   string `json:"name"`   // membership, org, discovery, seeds, links, clock, disk, mailbox
	Status string `json:"status"` // ok, warn or problem
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Doctor is the answer to GET /v1/doctor: why the node has the peers it
// has. Problems counts the checks with status problem.
type Doctor struct {
	Problems int           `json:"problems"`
	Links    int           `json:"links"`
	Members  int           `json:"members"`
	Checks   []DoctorCheck `json:"checks"`
}

// Doctor calls GET /v1/doctor.
func (c *Client) Doctor(ctx context.Context) (*Doctor, error) {
	var out Doctor
	return &out, c.Get(ctx, "/v1/doctor", &out)
}
