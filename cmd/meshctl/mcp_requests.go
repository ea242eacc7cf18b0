package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// request_any and cancel_request: the MCP faces of request --any and
// meshctl cancel.

// mcpMaxAcceptWait bounds request_any's wait for each candidate, so one
// tool call stays within what hosts allow a call.
const mcpMaxAcceptWait = int(api.MaxAcceptTimeout / time.Second)

type requestAnyIn struct {
	Intent        string          `json:"intent" jsonschema:"what you ask for, as members' cards list it (find_agents shows them)"`
	Params        json.RawMessage `json:"params,omitempty"`
	ReplyTo       string          `json:"reply_to,omitempty" jsonschema:"the request_id of the request this one follows up"`
	AcceptTimeout int             `json:"accept_timeout_seconds,omitempty" jsonschema:"how long to wait for each member to accept before asking the next (default 30, at most 300)"`
}

type cancelRequestIn struct {
	RequestID string `json:"request_id" jsonschema:"the request_id of one of this node's requests"`
	To        string `json:"to,omitempty" jsonschema:"the peer to tell; default: the peer that answered the request"`
}

func (m *mcpServer) addRequestTools(srv *mcp.Server) error {
	return errors.Join(
		addTool(srv, "request_any",
			"Ask whoever can: send a request for intent to one member whose card lists it (online members first, then away), moving to the next when one rejects or does not accept in time. Returns the member that took it and its first answer; later answers (progress, completed, failed) arrive in the inbox. Only operators and admins may send requests.",
			func(p map[string]*jsonschema.Schema) {
				p["params"] = &jsonschema.Schema{Type: "object", Description: "the request's arguments, a JSON object"}
				lo, hi := 0.0, float64(mcpMaxAcceptWait)
				p["accept_timeout_seconds"].Minimum, p["accept_timeout_seconds"].Maximum = &lo, &hi
			}, m.requestAny),
		addTool(srv, "cancel_request",
			"Ask the peer working on one of this node's requests to stop (a request for the intent meshd.cancel naming it). The peer decides, and answers as it sees fit.",
			nil, m.cancelRequest),
	)
}

func (m *mcpServer) requestAny(ctx context.Context, _ *mcp.CallToolRequest, in requestAnyIn) (*mcp.CallToolResult, any, error) {
	intent := strings.TrimSpace(in.Intent)
	switch {
	case intent == "" || len(intent) > proto.MaxIntentLen:
		return nil, nil, fmt.Errorf("intent must be 1 to %d bytes", proto.MaxIntentLen)
	case in.AcceptTimeout < 0 || in.AcceptTimeout > mcpMaxAcceptWait:
		return nil, nil, fmt.Errorf("accept_timeout_seconds must be 0 (default 30) to %d", mcpMaxAcceptWait)
	}
	params := in.Params
	if string(params) == "null" {
		params = nil
	}
	r, err := m.c.RequestAny(ctx, api.RequestAny{Intent: intent, Params: params, ReplyTo: in.ReplyTo, AcceptTimeoutSeconds: float64(in.AcceptTimeout)})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	if !r.Taken {
		return textResult("no member took the request: %d asked", len(r.Tried)), r, nil
	}
	text := fmt.Sprintf("%s took request %s (%s)", partyName(*r.Peer), r.Request.RequestID, r.Answer.Status)
	if r.Answer.Status == "accepted" || r.Answer.Status == "progress" {
		text += "; its further answers will arrive in the inbox"
	}
	return textResult("%s", text), r, nil
}

func (m *mcpServer) cancelRequest(ctx context.Context, _ *mcp.CallToolRequest, in cancelRequestIn) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.RequestID) == "" {
		return nil, nil, errors.New("request_id is empty")
	}
	s, err := call(ctx, func(ctx context.Context) (*api.Sent, error) {
		return m.c.Cancel(ctx, api.Cancel{RequestID: strings.TrimSpace(in.RequestID), To: strings.TrimSpace(in.To)})
	})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return textResult("asked %s to cancel request %s (cancel request %s)%s", orElse(s.To, "the peer"), in.RequestID, s.RequestID, sentText(s)), s, nil
}
