package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
)

// The agent-loop tools: claim (items for one worker of a pool), reply,
// search, list_requests (what this node asked, and the answers) and
// read_conversation (both sides of the exchange with one peer). Each
// answer is bounded.

// Bounds of the agent-loop tools' answers.
const (
	mcpClaimMax    = 100
	mcpListMax     = 500
	mcpListDefault = 50
)

type claimIn struct {
	ID          string `json:"id,omitempty" jsonschema:"one inbox item to claim (its id); empty: claim the oldest unread items no other worker holds"`
	Count       int    `json:"count,omitempty" jsonschema:"without id: how many items to claim (default 1, at most 100)"`
	LeaseSecs   int    `json:"lease_seconds,omitempty" jsonschema:"how long the claim holds (default 300, at most 86400); the item goes back to the pool after, unless read"`
	Worker      string `json:"worker,omitempty" jsonschema:"this worker's name: claiming again under it renews the lease"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"without id: wait up to this long (at most 600) for an item to claim (default 0: answer at once)"`
	Release     bool   `json:"release,omitempty" jsonschema:"with id: give the claim up, so another worker may take the item"`
	inboxFilterIn
}

type inboxFilterIn struct {
	From    string `json:"from,omitempty" jsonschema:"only items from this member (name, fingerprint or key)"`
	Kind    string `json:"kind,omitempty" jsonschema:"only items of this kind: message, request, response or delivery_failed"`
	Channel string `json:"channel,omitempty" jsonschema:"only items of this channel; '@' for direct items only"`
	Since   string `json:"since,omitempty" jsonschema:"only items delivered at or after this: a duration back from now (90m, 72h, 3d) or an RFC 3339 time"`
}

func (f inboxFilterIn) api() api.InboxFilter {
	return api.InboxFilter{From: f.From, Kind: f.Kind, Channel: f.Channel, Since: f.Since}
}

type replyIn struct {
	ID     string `json:"id" jsonschema:"the inbox item you answer (its id, not its request_id)"`
	Body   string `json:"body" jsonschema:"the message text (UTF-8, at most 256 KiB)"`
	From   string `json:"from,omitempty" jsonschema:"the item's sender, when several senders' items share the id"`
	Direct bool   `json:"direct,omitempty" jsonschema:"answer a channel message with a direct message to its sender instead of in the channel"`
}

type searchIn struct {
	Text  string `json:"text" jsonschema:"the text to find, case-insensitively, in bodies, intents, params, results and sender names"`
	Limit int    `json:"limit,omitempty" jsonschema:"the newest this many matches (default 50, at most 500)"`
	inboxFilterIn
}

type listRequestsIn struct {
	Pending bool `json:"pending,omitempty" jsonschema:"only the requests still waiting for a final answer"`
	Limit   int  `json:"limit,omitempty" jsonschema:"the newest this many (default 50, at most 500)"`
}

type conversationIn struct {
	Peer  string `json:"peer" jsonschema:"the member: roster name, fingerprint or key"`
	Since string `json:"since,omitempty" jsonschema:"only what was sent at or after this: a duration back from now (90m, 72h, 3d) or an RFC 3339 time"`
	Limit int    `json:"limit,omitempty" jsonschema:"the newest this many (default 50, at most 500)"`
}

func (m *mcpServer) addAgentTools(srv *mcp.Server) error {
	kindEnum := func(p map[string]*jsonschema.Schema) {
		p["kind"].Enum = []any{"message", "request", "response", "delivery_failed"}
	}
	return errors.Join(
		addTool(srv, "claim",
			`Claim inbox items for this worker when several workers share this node: no other worker can claim an item until its lease ends or it is read (mark_read, or send_response for a request, which marks it read). Returns {"items": [...]} with each item's claim. Claims live in meshd's memory: a restart of meshd frees them.`,
			kindEnum, m.claim),
		addTool(srv, "reply",
			"Answer an inbox item where it came from: a channel message in its channel, a direct message, request or response with a direct message to its sender. The answer's in_reply_to is the item's id.",
			nil, m.reply),
		addTool(srv, "search",
			`Find held inbox items (read ones too) whose text holds text. Returns {"items": [...]}, the newest matches, oldest first.`,
			kindEnum, m.search),
		addTool(srv, "list_requests",
			`The requests this node sent, newest first, each with its latest status (the newest response's status, or while none came its delivery state), its age, and whether it still waits for a final answer (pending).`,
			nil, m.listRequests),
		addTool(srv, "read_conversation",
			`The direct messages, requests and responses between this node and one member, both ways, oldest first; what this node sent has "out": true and its delivery state.`,
			nil, m.readConversation),
	)
}

func boundLimit(limit, def, max int) (int, error) {
	switch {
	case limit < 0:
		return 0, errors.New("limit must not be negative")
	case limit == 0:
		return def, nil
	}
	return min(limit, max), nil
}

func (m *mcpServer) claim(ctx context.Context, _ *mcp.CallToolRequest, in claimIn) (*mcp.CallToolResult, any, error) {
	lease := ""
	switch {
	case in.LeaseSecs < 0 || in.LeaseSecs > int(api.MaxLease/time.Second):
		return nil, nil, fmt.Errorf("lease_seconds must be 1 to %d", int(api.MaxLease/time.Second))
	case in.LeaseSecs > 0:
		lease = (time.Duration(in.LeaseSecs) * time.Second).String()
	}
	if in.ID != "" {
		it, err := call(ctx, func(ctx context.Context) (*api.Item, error) {
			return m.c.Claim(ctx, in.ID, in.From, api.Claim{Worker: in.Worker, Lease: lease, Release: in.Release})
		})
		if err != nil {
			return nil, nil, m.toolErr(err)
		}
		return nil, &api.Inbox{Items: []api.Item{*it}}, nil
	}
	if in.Release {
		return nil, nil, errors.New("release needs the id of the item")
	}
	count := in.Count
	if count == 0 {
		count = 1
	}
	if count < 0 || count > mcpClaimMax {
		return nil, nil, fmt.Errorf("count must be 1 to %d", mcpClaimMax)
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > 600 {
		return nil, nil, errors.New("wait_seconds must be 0 to 600")
	}
	q := api.ClaimNext{Count: count, Worker: in.Worker, Lease: lease, InboxFilter: in.inboxFilterIn.api()}
	bound := api.DefaultTimeout
	if in.WaitSeconds > 0 {
		q.Wait, q.Timeout = true, (time.Duration(in.WaitSeconds) * time.Second).String()
		bound += time.Duration(in.WaitSeconds) * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	box, err := m.c.ClaimNext(cctx, q)
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return nil, box, nil
}

func (m *mcpServer) reply(ctx context.Context, _ *mcp.CallToolRequest, in replyIn) (*mcp.CallToolResult, any, error) {
	if in.ID == "" {
		return nil, nil, errors.New("id is empty")
	}
	s, err := call(ctx, func(ctx context.Context) (*api.Sent, error) {
		return m.c.Reply(ctx, api.Reply{ID: in.ID, From: in.From, Body: in.Body, Direct: in.Direct})
	})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return textResult("sent reply to %s%s", orElse(s.To, "the sender"), sentText(s)), s, nil
}

func (m *mcpServer) search(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
	if in.Text == "" {
		return nil, nil, errors.New("text is empty")
	}
	limit, err := boundLimit(in.Limit, mcpListDefault, mcpListMax)
	if err != nil {
		return nil, nil, err
	}
	box, err := call(ctx, func(ctx context.Context) (*api.Inbox, error) {
		return m.c.Search(ctx, in.Text, limit, in.inboxFilterIn.api())
	})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return nil, box, nil
}

func (m *mcpServer) listRequests(ctx context.Context, _ *mcp.CallToolRequest, in listRequestsIn) (*mcp.CallToolResult, any, error) {
	limit, err := boundLimit(in.Limit, mcpListDefault, mcpListMax)
	if err != nil {
		return nil, nil, err
	}
	l, err := call(ctx, func(ctx context.Context) (*api.SentRequests, error) { return m.c.Requests(ctx, in.Pending, limit) })
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return nil, l, nil
}

func (m *mcpServer) readConversation(ctx context.Context, _ *mcp.CallToolRequest, in conversationIn) (*mcp.CallToolResult, any, error) {
	if in.Peer == "" {
		return nil, nil, errors.New("peer is empty")
	}
	limit, err := boundLimit(in.Limit, mcpListDefault, mcpListMax)
	if err != nil {
		return nil, nil, err
	}
	c, err := call(ctx, func(ctx context.Context) (*api.Conversation, error) {
		return m.c.Conversation(ctx, in.Peer, in.Since, limit)
	})
	if err != nil {
		return nil, nil, m.toolErr(err)
	}
	return nil, c, nil
}
