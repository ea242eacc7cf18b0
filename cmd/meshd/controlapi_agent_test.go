package main

import (
	"strings"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

// exerciseAgentLoop drives the agent-loop endpoints: claims, reply,
// search, requests and conversations, with their refusals. chID is a
// channel message of alice's in #ops, which bob holds (read).
func (c *apiChecker) exerciseAgentLoop(alice, bob, chID string) {
	c.t.Helper()
	const js = "application/json"
	var dm struct{ ID string }
	c.json(alice, "POST", "/v1/send", map[string]string{"to": "bob", "body": "claim me"}, 200, &dm)
	var in struct{ Items []struct{ ID string } }
	if !testwait.Until(10*time.Second, func() bool {
		in.Items = nil
		c.json(bob, "GET", "/v1/inbox?from=alice&kind=message&channel=%40&since=1h", nil, 200, &in)
		return len(in.Items) > 0 && in.Items[len(in.Items)-1].ID == dm.ID
	}) {
		c.t.Fatalf("bob never got the DM to claim: %+v", in)
	}
	c.refused(bob, reqInvalid, "GET", "/v1/inbox?kind=bogus", "", nil, 400, false)
	c.refused(bob, reqValid, "GET", "/v1/inbox?since=yesterday", "", nil, 400, false)
	c.refused(bob, reqValid, "GET", "/v1/inbox?from=nobody", "", nil, 404, true)

	var claimed struct {
		ID    string
		Claim *struct{ Worker string }
	}
	c.json(bob, "POST", "/v1/inbox/"+dm.ID+"/claim", map[string]string{"worker": "w1", "lease": "1m"}, 200, &claimed)
	if claimed.ID != dm.ID || claimed.Claim == nil || claimed.Claim.Worker != "w1" {
		c.t.Fatalf("claimed: %+v", claimed)
	}
	if msg := c.refused(bob, reqValid, "POST", "/v1/inbox/"+dm.ID+"/claim", js, []byte(`{"worker":"w2"}`), 409, true); !strings.Contains(msg, `"w1"`) {
		c.t.Fatalf("claim of w1's item by w2: %q", msg)
	}
	c.refused(bob, reqValid, "POST", "/v1/inbox/not-a-uuid/claim", js, []byte(`{}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/inbox/0f8f7b0e-3a43-4d8e-9b55-6c1e0b8f2a11/claim", js, []byte(`{}`), 404, true)
	c.refused(bob, reqValid, "POST", "/v1/inbox/"+dm.ID+"/claim", js, []byte(`{"lease":"forever"}`), 400, false)
	c.json(bob, "POST", "/v1/inbox/"+dm.ID+"/claim", map[string]any{"worker": "w1", "release": true}, 200, nil)
	var next struct{ Items []struct{ ID string } }
	c.json(bob, "POST", "/v1/inbox/claim", map[string]any{"count": 5, "worker": "w2", "kind": "message"}, 200, &next)
	if len(next.Items) != 1 || next.Items[0].ID != dm.ID {
		c.t.Fatalf("claim next after the release: %+v", next)
	}
	c.json(bob, "POST", "/v1/inbox/claim", map[string]any{"count": 1, "wait": true, "timeout": "100ms"}, 200, nil)
	c.refused(bob, reqInvalid, "POST", "/v1/inbox/claim", js, []byte(`{"count":0}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/inbox/claim", js, []byte(`{"count":1,"from":"nobody"}`), 404, true)

	// Reply: bob may not write to #ops, but may answer alice directly.
	c.refused(bob, reqValid, "POST", "/v1/reply", js, []byte(`{"id":"`+chID+`","body":"ack"}`), 403, false)
	var rp struct{ To string }
	c.json(bob, "POST", "/v1/reply", map[string]any{"id": chID, "body": "ack", "direct": true}, 200, &rp)
	if rp.To != "@alice" {
		c.t.Fatalf("direct reply went to %q", rp.To)
	}
	c.refused(bob, reqInvalid, "POST", "/v1/reply", js, []byte(`{"id":"x","body":"ack"}`), 400, false)
	c.refused(bob, reqValid, "POST", "/v1/reply", js, []byte(`{"id":"0f8f7b0e-3a43-4d8e-9b55-6c1e0b8f2a11","body":"ack"}`), 404, true)

	var found struct{ Items []struct{ ID string } }
	c.json(bob, "GET", "/v1/search?q=CLAIM+ME&limit=10", nil, 200, &found)
	if len(found.Items) != 1 || found.Items[0].ID != dm.ID {
		c.t.Fatalf("search: %+v", found)
	}
	c.refused(bob, reqInvalid, "GET", "/v1/search", "", nil, 400, false)
	c.refused(bob, reqValid, "GET", "/v1/search?q=x&channel=nope", "", nil, 404, true)

	c.json(alice, "GET", "/v1/requests?pending=1&limit=10", nil, 200, nil)
	c.json(alice, "GET", "/v1/requests", nil, 200, nil)
	c.refused(alice, reqInvalid, "GET", "/v1/requests?limit=x", "", nil, 400, false)

	var conv struct {
		Entries []struct {
			ID  string
			Out bool
		}
	}
	c.json(alice, "GET", "/v1/conversation?peer=bob&since=1h", nil, 200, &conv)
	if len(conv.Entries) == 0 {
		c.t.Fatal("alice's conversation with bob is empty")
	}
	c.refused(alice, reqInvalid, "GET", "/v1/conversation", "", nil, 400, false)
	c.refused(alice, reqValid, "GET", "/v1/conversation?peer=nobody", "", nil, 404, true)
}
