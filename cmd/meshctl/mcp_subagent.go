package main

import (
	"context"
	"encoding/json"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
)

type postSubagentIn struct {
	SubagentID string          `json:"subagent_id" jsonschema:"the subagent's id or name, 1 to 128 bytes on one line"`
	Summary    string          `json:"summary" jsonschema:"what the subagent found or did, 1 to 8192 bytes"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// addSubagentTool adds post_subagent_result.
func (m *mcpServer) addSubagentTool(srv *mcp.Server) error {
	return addTool(srv, "post_subagent_result",
		"Put the result of a subagent (a worker you started: a process, a forked turn) in your own inbox as a subagent_result item, at high priority: it wakes wait_inbox. It is local only and never sent to any peer.",
		func(p map[string]*jsonschema.Schema) {
			p["result"] = &jsonschema.Schema{Description: "the subagent's result, any JSON value"}
		}, m.postSubagent)
}

func (m *mcpServer) postSubagent(ctx context.Context, _ *mcp.CallToolRequest, in postSubagentIn) (*mcp.CallToolResult, any, error) {
	it, err := call(ctx, func(ctx context.Context) (*api.Item, error) {
		return m.c.PostSubagentResult(ctx, api.SubagentResult{SubagentID: in.SubagentID, Summary: in.Summary, Result: in.Result})
	})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return textResult("posted the result of subagent %s to your inbox (item %s)", in.SubagentID, it.ID), it, nil
}
