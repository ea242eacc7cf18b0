package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// waitRequest polls name's unread inbox for a request for intent, marks
// it read, and returns its request id.
func (o *histOrg) waitRequest(name, intent string, within time.Duration) string {
	o.t.Helper()
	var found string
	if !testwait.Until(within, func() bool {
		var in struct {
			Items []struct {
				ID, Kind, Intent string
				RequestID        string `json:"request_id"`
			} `json:"items"`
		}
		meshctlJSON(o.t, o.meshctl, &in, "--home", o.homes[name], "inbox")
		for _, it := range in.Items {
			if it.Kind == "request" && it.Intent == intent {
				o.ctl(name, "read", it.ID)
				found = it.RequestID
				return true
			}
		}
		return false
	}) {
		o.t.Fatalf("%s got no request for %s within %v", name, intent, within)
	}
	return found
}

// waitCancel polls name's inbox for a cancel of request rid, and returns
// the cancel's own request id.
func (o *histOrg) waitCancel(name, rid string) string {
	o.t.Helper()
	var in struct {
		Items []struct {
			Kind, Intent string
			RequestID    string            `json:"request_id"`
			Params       map[string]string `json:"params"`
		} `json:"items"`
	}
	var found string
	if !testwait.Until(10*time.Second, func() bool {
		in.Items = nil
		meshctlJSON(o.t, o.meshctl, &in, "--home", o.homes[name], "inbox", "--all")
		for _, it := range in.Items {
			if it.Kind == "request" && it.Intent == "meshd.cancel" && it.Params["request_id"] == rid {
				found = it.RequestID
				return true
			}
		}
		return false
	}) {
		o.t.Fatalf("%s got no cancel of %s: %+v", name, rid, in)
	}
	return found
}

// TestRequestAnyEndToEnd: request --any asks the members whose card lists
// the intent, online first and by name: bob, who stays silent past the
// accept timeout, then carol, who accepts, reports progress twice (shown
// by --wait as they come) and completes; and, asked
// again, bob rejects and carol takes it. meshctl cancel reaches carol
// (found by her answer) and bob (named). Without a card for the intent,
// request --any names the fix.
func TestRequestAnyEndToEnd(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob", "carol")
	card := filepath.Join(t.TempDir(), "card.json")
	if err := os.WriteFile(card, []byte(`{"intents": [{"name": "run-tests"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o.ctl("bob", "card", "set", "--file", card)
	o.ctl("carol", "card", "set", "--file", card)
	o.waitAgent(o.homes["alice"], "run-tests", "bob", 1, 10*time.Second)
	o.waitAgent(o.homes["alice"], "run-tests", "carol", 1, 10*time.Second)

	// 1. bob silent, carol accepts and completes.
	cmd := exec.Command(o.meshctl, "--home", o.homes["alice"], "request", "--any", "--intent", "run-tests",
		"--accept-timeout", "2s", "--wait", "--timeout", "30s", "--params", `{"branch":"main"}`)
	cmd.Env = cleanEnv()
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	bobRID := o.waitRequest("bob", "run-tests", 10*time.Second)
	rid := o.waitRequest("carol", "run-tests", 15*time.Second)
	if rid == bobRID {
		t.Fatal("bob and carol got the same request id")
	}
	o.ctl("carol", "respond", rid, "accepted")
	o.ctl("carol", "respond", rid, "progress", "--note", "3 of 7 run")
	o.ctl("carol", "respond", rid, "progress", "--note", "6 of 7 run")
	o.ctl("carol", "respond", rid, "completed", "--result", `{"passed":7}`)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("request --any: %v\n%s\n%s", err, out.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("request --any did not return:\n%s", out.String())
	}
	for _, w := range []string{"asked bob (online)", "bob: no answer within 2s; asking the next", "asked carol (online)",
		"3 of 7 run", "6 of 7 run", "completed"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("request --any output lacks %q:\n%s", w, out.String())
		}
	}

	// Cancel: carol answered, so she is found; bob never did, so he
	// must be named.
	o.ctl("alice", "cancel", rid)
	if got := o.waitCancel("carol", rid); got == "" {
		t.Fatal("carol got no cancel")
	}
	r := meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "cancel", bobRID)
	if r.code != 1 || !strings.Contains(r.stderr, "--to PEER") {
		t.Fatalf("cancel of an unanswered request: %+v", r)
	}
	o.ctl("alice", "cancel", bobRID, "--to", "bob")
	o.waitCancel("bob", bobRID)

	// 2. bob rejects, carol accepts; without --wait it ends there.
	cmd = exec.Command(o.meshctl, "--home", o.homes["alice"], "request", "--any", "--intent", "run-tests", "--accept-timeout", "20s", "--json")
	cmd.Env = cleanEnv()
	var out2 syncBuffer
	cmd.Stdout, cmd.Stderr = &out2, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done2 := make(chan error, 1)
	go func() { done2 <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	rid = o.waitRequest("bob", "run-tests", 10*time.Second)
	o.ctl("bob", "respond", rid, "rejected", "--result", `{"reason":"busy"}`)
	rid2 := o.waitRequest("carol", "run-tests", 10*time.Second)
	o.ctl("carol", "respond", rid2, "accepted")
	select {
	case err := <-done2:
		if err != nil {
			t.Fatalf("request --any (2): %v\n%s\n%s", err, out2.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("request --any (2) did not return:\n%s", out2.String())
	}
	var res struct {
		Taken bool
		Peer  struct{ Name string }
		Tried []struct{ Name, Outcome string }
	}
	if err := json.Unmarshal([]byte(out2.String()), &res); err != nil || !res.Taken || res.Peer.Name != "carol" || len(res.Tried) != 2 ||
		res.Tried[0].Name != "bob" || res.Tried[0].Outcome != "rejected" || res.Tried[1].Outcome != "accepted" {
		t.Fatalf("request --any --json: %v\n%s", err, out2.String())
	}

	// 3. Nobody serves the intent.
	r = meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "request", "--any", "--intent", "deploy")
	if r.code != 1 || !strings.Contains(r.stderr, "no online or away member's card lists intent \"deploy\"") {
		t.Fatalf("request --any for an unserved intent: %+v", r)
	}
}

// TestRequestAnyMCP: the MCP faces of the same. send_request warns when
// the peer's card does not list the intent and refuses with strict;
// request_any moves on from bob's rejection to carol, who accepts;
// cancel_request reaches carol.
func TestRequestAnyMCP(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob", "carol")
	card := filepath.Join(t.TempDir(), "card.json")
	if err := os.WriteFile(card, []byte(`{"intents": [{"name": "run-tests"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o.ctl("bob", "card", "set", "--file", card)
	o.ctl("carol", "card", "set", "--file", card)
	o.waitAgent(o.homes["alice"], "run-tests", "bob", 1, 10*time.Second)
	o.waitAgent(o.homes["alice"], "run-tests", "carol", 1, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(o.meshctl, "--home", o.homes["alice"], "mcp")
	cmd.Env = cleanEnv()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}

	// An intent bob's card does not list: sent with a warning, or
	// refused with strict.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_request", Arguments: map[string]any{"target": "bob", "intent": "deploy"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "warning: bob's card does not list intent deploy (it lists: run-tests)") {
		t.Fatalf("send_request for an unlisted intent: %v %q", err, text(res))
	}
	o.waitRequest("bob", "deploy", 10*time.Second)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_request", Arguments: map[string]any{"target": "bob", "intent": "deploy", "strict": true}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "--strict: bob's card does not list intent deploy") {
		t.Fatalf("strict send_request for an unlisted intent: %v %q", err, text(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_request", Arguments: map[string]any{"target": "bob", "intent": "run-tests", "strict": true}})
	if err != nil || res.IsError || strings.Contains(text(res), "warning") {
		t.Fatalf("strict send_request for a listed intent: %v %q", err, text(res))
	}
	o.waitRequest("bob", "run-tests", 10*time.Second)

	// request_any: bob rejects, carol accepts.
	type callOut struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan callOut, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_any", Arguments: map[string]any{
			"intent": "run-tests", "params": map[string]any{"branch": "main"}, "accept_timeout_seconds": 20}})
		done <- callOut{res, err}
	}()
	rid := o.waitRequest("bob", "run-tests", 10*time.Second)
	o.ctl("bob", "respond", rid, "rejected")
	rid2 := o.waitRequest("carol", "run-tests", 10*time.Second)
	o.ctl("carol", "respond", rid2, "accepted")
	var got callOut
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatal("request_any did not return")
	}
	if got.err != nil || got.res.IsError {
		t.Fatalf("request_any: %v %q", got.err, text(got.res))
	}
	b, _ := json.Marshal(got.res.StructuredContent)
	var taken struct {
		Taken   bool
		Peer    struct{ Name string }
		Request struct {
			RequestID string `json:"request_id"`
		}
		Answer struct{ Status string }
		Tried  []struct{ Peer, Outcome string }
	}
	if err := json.Unmarshal(b, &taken); err != nil || !taken.Taken || taken.Peer.Name != "carol" || taken.Request.RequestID != rid2 ||
		taken.Answer.Status != "accepted" || len(taken.Tried) != 2 || taken.Tried[0].Outcome != "rejected" {
		t.Fatalf("request_any: %v %s", err, b)
	}

	// request_any for an intent nobody serves names the fix.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "request_any", Arguments: map[string]any{"intent": "deploy"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "no online or away member's card lists intent \"deploy\"") {
		t.Fatalf("request_any for an unserved intent: %v %q", err, text(res))
	}

	// cancel_request finds carol by her answer.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_request", Arguments: map[string]any{"request_id": rid2}})
	if err != nil || res.IsError {
		t.Fatalf("cancel_request: %v %q", err, text(res))
	}
	o.waitCancel("carol", rid2)
}
