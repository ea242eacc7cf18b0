package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

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
