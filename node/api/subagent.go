package api

import (
	"context"
	"encoding/json"
)

// POST /v1/subagent-results puts a subagent's result in this node's own
// inbox (body: SubagentResult; answer: the Item). It is local only: the
// item is never sent to any peer.

// KindSubagentResult is the Item kind of a subagent result.
const KindSubagentResult = "subagent_result"

// SubagentResult is the body of POST /v1/subagent-results.
type SubagentResult struct {
	// SubagentID names the subagent: 1 to 128 bytes of text on one line.
	SubagentID string `json:"subagent_id"`
	// Summary says what it found or did: 1 to 8192 bytes.
	Summary string `json:"summary"`
	// Result is any JSON value; the whole item is at most 256 KiB.
	Result json.RawMessage `json:"result,omitempty"`
}

// PostSubagentResult calls POST /v1/subagent-results.
func (c *Client) PostSubagentResult(ctx context.Context, in SubagentResult) (*Item, error) {
	var out Item
	return &out, c.postJSON(ctx, "/v1/subagent-results", in, &out)
}
