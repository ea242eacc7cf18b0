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
	// Org is the org the node came from, when it knocked from another
	// org (PROTOCOL.md §14.11); empty when it dialled as a node of ours.
	// The org id is what the node claims; it is checked only when Fresh.
	Org string `json:"org,omitempty"`
	// Fresh: the node proved that its org is a one-node org of its own
	// (its self-signed roster lists only itself). Once added, it adopts
	// this org; a node of another org with members is never moved.
	Fresh bool `json:"fresh,omitempty"`
}

// Knocked is one org this node knocked at because a seed or an mDNS
// peer answered as another org: what it learnt, and whether it may
// adopt that org's roster (GET /v1/adopt).
type Knocked struct {
	Org         string       `json:"org"`
	Node        proto.PubKey `json:"node"`
	Fingerprint string       `json:"fingerprint"`
	Address     string       `json:"address"`
	Via         string       `json:"via"` // "seed" (an address the user named) or "mdns"
	LastKnock   time.Time    `json:"last_knock"`
	// State: "pending" (listed there, not yet a member), "offered" (its
	// roster lists this node but was not adopted: Reason says why),
	// "no_answer" (nothing, or an older meshd, answered the knock).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Admins are the fingerprints of the admins of the roster it
	// offered, the ones meshctl adopt may confirm.
	Admins []string `json:"admins,omitempty"`
}

// Adopt is the answer to GET /v1/adopt, and to POST /v1/adopt.
type Adopt struct {
	// Fresh: this node's org is a one-node org of its own, so it may
	// adopt another org's roster that lists it.
	Fresh bool   `json:"fresh"`
	Org   string `json:"org"`
	// Confirmed are the admin fingerprints meshctl adopt confirmed: a
	// roster signed by one of them is adopted even from mDNS.
	Confirmed []string  `json:"confirmed"`
	Knocked   []Knocked `json:"knocked"`
}

// AdoptRequest is the body of POST /v1/adopt.
type AdoptRequest struct {
	// Fingerprint is an admin's key or fingerprint (16 hex digits) of
	// the org to adopt.
	Fingerprint string `json:"fingerprint"`
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

// AdoptState calls GET /v1/adopt.
func (c *Client) AdoptState(ctx context.Context) (*Adopt, error) {
	var out Adopt
	return &out, c.Get(ctx, "/v1/adopt", &out)
}

// Adopt calls POST /v1/adopt.
func (c *Client) Adopt(ctx context.Context, in AdoptRequest) (*Adopt, error) {
	var out Adopt
	return &out, c.postJSON(ctx, "/v1/adopt", in, &out)
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
