package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
)

// TestMCPAgentLoopTools drives the claim, reply, search, list_requests and
// read_conversation tools of the real 'meshctl mcp' binary against a real
// node: bob's worker claims alice's DM and her request, answers both,
// and alice reads the requests she sent and the conversation.
func TestMCPAgentLoopTools(t *testing.T) {
	t.Parallel()
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(home string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "meshctl-test", Version: "1"}, nil)
		cmd := exec.Command(bin, "--home", home, "mcp")
		cmd.Env = append(os.Environ(), "MESH_HOME=")
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	as, bs := connect(alice.home), connect(bob.home)

	dm, err := alice.c.Send(ctx, api.Send{To: "bob", Body: "please look at the Flaky test"})
	if err != nil {
		t.Fatal(err)
	}
	rq, err := alice.c.Request(ctx, api.Request{To: "bob", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}

	// claim waits for the request, and another worker cannot take it.
	box := structured[api.Inbox](t, toolOK(t, ctx, bs, "claim", map[string]any{"kind": "request", "worker": "w1", "wait_seconds": 20}))
	if len(box.Items) != 1 || box.Items[0].RequestID != rq.RequestID || box.Items[0].Claim == nil || box.Items[0].Claim.Worker != "w1" {
		t.Fatalf("claim: %+v", box.Items)
	}
	if res := callTool(t, ctx, bs, "claim", map[string]any{"id": box.Items[0].ID, "worker": "w2"}); !res.IsError {
		t.Fatalf("w2 claimed w1's item: %s", toolText(res))
	}
	toolOK(t, ctx, bs, "send_response", map[string]any{"request_id": rq.RequestID, "status": "completed"})

	// search finds the DM; reply answers it.
	found := structured[api.Inbox](t, toolOK(t, ctx, bs, "search", map[string]any{"text": "flaky", "from": "alice"}))
	if len(found.Items) != 1 || found.Items[0].ID != dm.ID {
		t.Fatalf("search: %+v", found.Items)
	}
	rp := structured[api.Sent](t, toolOK(t, ctx, bs, "reply", map[string]any{"id": dm.ID, "body": "on it"}))
	if rp.To != "@alice" {
		t.Fatalf("reply went to %q", rp.To)
	}

	// alice: the request's status, then the conversation both ways.
	if err := pollUntil(ctx, "the completed answer", func() bool {
		l := structured[api.SentRequests](t, toolOK(t, ctx, as, "list_requests", map[string]any{}))
		return len(l.Requests) == 1 && l.Requests[0].Status == "completed" && !l.Requests[0].Pending
	}); err != nil {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, "bob's reply in the conversation", func() bool {
		c := structured[api.Conversation](t, toolOK(t, ctx, as, "read_conversation", map[string]any{"peer": "bob"}))
		n := len(c.Entries)
		return n == 4 && c.Entries[0].Out && c.Entries[0].ID == dm.ID && !c.Entries[n-1].Out && c.Entries[n-1].ID == rp.ID
	}); err != nil {
		t.Fatal(err)
	}
	if res := callTool(t, ctx, as, "search", map[string]any{"text": "x", "kind": "bogus"}); !res.IsError {
		t.Fatalf("search with kind bogus: %s", toolText(res))
	}
}
