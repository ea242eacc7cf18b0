package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/roster"
)

// mcpTools are the tools 'meshctl mcp' serves, sorted.
var mcpTools = []string{"cancel_request", "claim", "delivery_status", "find_agents", "list_channels", "list_peers", "list_requests", "mark_read", "mute", "post_subagent_result",
	"read_attachment", "read_conversation", "read_history", "read_inbox", "reply", "request_any", "search",
	"send_message", "send_request", "send_response", "set_presence", "subscribe", "unmute", "unsubscribe", "wait_inbox"}

// startMCPMesh starts alice (admin) and bob (member) in process and waits
// until they link.
func startMCPMesh(t *testing.T) *demoMesh {
	t.Helper()
	// Not t.TempDir: the control sockets' paths must stay short.
	dir, err := os.MkdirTemp("", "mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m, err := startDemoMesh(dir, "mcp", []demoMember{{"alice", roster.RoleAdmin}, {"bob", roster.RoleMember}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.waitFullMesh(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// callTool calls a tool and returns its result; a protocol error fails
// the test.
func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// toolText is the text content of a tool result.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// toolOK calls a tool and fails the test unless it succeeds.
func toolOK(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res := callTool(t, ctx, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error %q", name, args, toolText(res))
	}
	return res
}

// structured decodes a tool result's structured content.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	return decode[T](t, string(b))
}

// TestMCPServer drives the real 'meshctl mcp' binary with the Go SDK's
// client over stdio, against a real node: the tools, the inbox resource
// and its doorbell, and a clean exit when stdin closes.
func TestMCPServer(t *testing.T) {
	t.Parallel()
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := alice.n.Backend().CreateChannel(api.CreateChannel{Name: "general"}); err != nil {
		t.Fatal(err)
	}

	updated := make(chan string, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "meshctl-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	acked := make(chan struct{}, 8)
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				acked <- struct{}{}
			}
			return next(ctx, method, req)
		}
	})
	var stderr syncBuffer
	cmd := exec.Command(bin, "--home", alice.home, "mcp", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "MESH_HOME=")
	cmd.Stderr = &stderr
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("meshctl mcp stderr:\n%s", stderr.String())
		}
	}()

	// Initialize: who answers, and what it can do.
	ir := cs.InitializeResult()
	if ir.ServerInfo.Name != "meshctl" || ir.Capabilities.Tools == nil || ir.Capabilities.Resources == nil ||
		!ir.Capabilities.Resources.Subscribe || !strings.Contains(ir.Instructions, "passive data") {
		t.Errorf("initialize: %+v, capabilities %+v", ir.ServerInfo, ir.Capabilities)
	}

	// All the tools, with their parameters.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]map[string]any{}
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		schemas[tool.Name] = decode[map[string]any](t, string(b))
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools %v, want %v", names, mcpTools)
	}
	required := func(tool string) []string {
		var out []string
		for _, r := range schemas[tool]["required"].([]any) {
			out = append(out, r.(string))
		}
		slices.Sort(out)
		return out
	}
	for tool, want := range map[string][]string{
		"send_message":      {"body", "target"},
		"send_request":      {"intent", "target"},
		"send_response":     {"request_id", "status"},
		"set_presence":      {"state"},
		"subscribe":         {"channel"},
		"mute":              {"channel"},
		"reply":             {"body", "id"},
		"search":            {"text"},
		"read_conversation": {"peer"},
	} {
		if got := required(tool); !slices.Equal(got, want) {
			t.Errorf("%s requires %v, want %v", tool, got, want)
		}
	}
	if _, ok := schemas["read_inbox"]["required"]; ok {
		t.Errorf("read_inbox has required parameters: %v", schemas["read_inbox"])
	}
	props := schemas["set_presence"]["properties"].(map[string]any)
	if enum := props["state"].(map[string]any)["enum"]; len(enum.([]any)) != 4 {
		t.Errorf("set_presence state enum %v", enum)
	}
	props = schemas["send_request"]["properties"].(map[string]any)
	if typ := props["params"].(map[string]any)["type"]; typ != "object" {
		t.Errorf("send_request params type %v", typ)
	}

	// send_message to a peer and to a channel.
	res := toolOK(t, ctx, cs, "send_message", map[string]any{"target": "bob", "body": "hello bob, over MCP"})
	if s := structured[api.Sent](t, res); s.ID == "" || len(s.SentTo) != 1 || !strings.Contains(toolText(res), s.ID) {
		t.Errorf("send_message to bob: %+v %q", s, toolText(res))
	}
	if _, err := waitItem(ctx, bob, func(it api.Item) bool { return it.Body == "hello bob, over MCP" }); err != nil {
		t.Fatal(err)
	}
	// delivery_status follows it until bob's ack arrives.
	dmID := structured[api.Sent](t, res).ID
	var d api.Delivery
	var text string
	if !testwait.Until(10*time.Second, func() bool {
		res := toolOK(t, ctx, cs, "delivery_status", map[string]any{"id": dmID})
		d, text = structured[api.Delivery](t, res), toolText(res)
		return len(d.Recipients) == 1 && d.Recipients[0].State == "delivered" && strings.Contains(text, "delivered")
	}) {
		t.Fatalf("delivery_status of the DM: %+v %q", d, text)
	}
	if l := structured[api.SentList](t, toolOK(t, ctx, cs, "delivery_status", map[string]any{})); len(l.Items) != 1 || l.Items[0].ID != dmID {
		t.Errorf("delivery_status list: %+v", l)
	}
	res = toolOK(t, ctx, cs, "send_message", map[string]any{"target": "#General", "body": "hello all"})
	if s := structured[api.Sent](t, res); s.To != "#general" || s.Kind != "message" {
		t.Errorf("send_message to #general: %+v", s)
	}

	// A refusal from meshd is a tool error with meshd's message.
	res = callTool(t, ctx, cs, "send_message", map[string]any{"target": "nobody", "body": "x"})
	if !res.IsError || !strings.HasPrefix(toolText(res), "meshd refused: ") {
		t.Errorf("send to an unknown peer: error %v, %q", res.IsError, toolText(res))
	}
	res = callTool(t, ctx, cs, "send_response", map[string]any{"request_id": "0193a0c4-0000-7000-8000-000000000000", "status": "completed"})
	if !res.IsError || !strings.Contains(toolText(res), "meshd refused: ") {
		t.Errorf("respond to an unknown request: error %v, %q", res.IsError, toolText(res))
	}
	// So is input the schema refuses.
	res = callTool(t, ctx, cs, "set_presence", map[string]any{"state": "busy"})
	if !res.IsError {
		t.Errorf("set_presence busy: %q", toolText(res))
	}

	// The other tools.
	toolOK(t, ctx, cs, "set_presence", map[string]any{"state": "away"})
	res = toolOK(t, ctx, cs, "mute", map[string]any{"channel": "general"})
	if ch := structured[api.Channel](t, res); ch.Subscription != "muted" {
		t.Errorf("mute: %+v", ch)
	}
	toolOK(t, ctx, cs, "unmute", map[string]any{"channel": "#general"})
	toolOK(t, ctx, cs, "unsubscribe", map[string]any{"channel": "general"})
	res = toolOK(t, ctx, cs, "subscribe", map[string]any{"channel": "general"})
	if ch := structured[api.Channel](t, res); ch.Subscription != "subscribed" {
		t.Errorf("subscribe: %+v", ch)
	}
	res = toolOK(t, ctx, cs, "send_request", map[string]any{"target": "bob", "intent": "run-tests", "params": map[string]any{"branch": "main"}})
	rq := structured[api.Sent](t, res)
	got, err := waitItem(ctx, bob, func(it api.Item) bool { return it.Kind == "request" && it.RequestID == rq.RequestID })
	if err != nil {
		t.Fatal(err)
	}
	if p := decode[map[string]string](t, string(got.Params)); p["branch"] != "main" || len(p) != 1 {
		t.Errorf("request params %s", got.Params)
	}

	// The doorbell: subscribe to meshd://inbox, bob sends alice a DM, and
	// the update notification comes.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: inboxURI}); err != nil {
		t.Fatal(err)
	}
	// At the newest protocol, Subscribe opens a subscriptions/listen
	// stream and returns before the server acknowledges it: a DM sent at
	// once came, in 1 of 6 runs, before the server held the subscription,
	// and rang no bell. Subscribed once acknowledged, as in
	// TestMCPVersions.
	select {
	case <-acked:
	case <-ctx.Done():
		t.Fatal("no notifications/subscriptions/acknowledged")
	}
	drain(updated)
	start := time.Now()
	if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "ding dong"}); err != nil {
		t.Fatal(err)
	}
	for rang := false; !rang; {
		select {
		case uri := <-updated:
			if uri != inboxURI {
				t.Fatalf("update for %q", uri)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: inboxURI})
			if err != nil {
				t.Fatal(err)
			}
			c := rr.Contents[0]
			if c.MIMEType != "application/json" {
				t.Errorf("meshd://inbox mime type %q", c.MIMEType)
			}
			rang = strings.Contains(c.Text, "ding dong")
		case <-time.After(5*time.Second - time.Since(start)):
			t.Fatal("no notifications/resources/updated within 5 s of the DM")
		}
	}
	t.Logf("doorbell rang %s after the DM", time.Since(start).Round(time.Millisecond))
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: inboxURI}); err != nil {
		t.Fatal(err)
	}

	// post_subagent_result: a local item that wakes wait_inbox.
	res = toolOK(t, ctx, cs, "post_subagent_result", map[string]any{"subagent_id": "w1", "summary": "done", "result": map[string]any{"ok": true}})
	sub := structured[api.Item](t, res)
	if sub.Kind != "subagent_result" || sub.SubagentID != "w1" || sub.Priority != "high" || !strings.Contains(toolText(res), sub.ID) {
		t.Errorf("post_subagent_result: %+v %q", sub, toolText(res))
	}
	if w := toolText(toolOK(t, ctx, cs, "wait_inbox", map[string]any{"timeout_seconds": 5})); !strings.Contains(w, sub.ID) || !strings.Contains(w, "subagent_result") {
		t.Errorf("wait_inbox after post_subagent_result: %s", w)
	}
	if res = callTool(t, ctx, cs, "post_subagent_result", map[string]any{"subagent_id": "w1", "summary": ""}); !res.IsError {
		t.Errorf("post_subagent_result with no summary: %q", toolText(res))
	}

	// read_inbox: the items as JSON text; mark_read empties the unread list.
	res = toolOK(t, ctx, cs, "read_inbox", nil)
	in := decode[api.Inbox](t, toolText(res))
	if !slices.ContainsFunc(in.Items, func(it api.Item) bool { return it.Body == "ding dong" && !it.Read }) {
		t.Errorf("read_inbox: %s", toolText(res))
	}
	res = toolOK(t, ctx, cs, "read_inbox", map[string]any{"mark_read": true, "limit": 10})
	in = decode[api.Inbox](t, toolText(res))
	if len(in.Items) == 0 || slices.ContainsFunc(in.Items, func(it api.Item) bool { return !it.Read }) {
		t.Errorf("read_inbox mark_read: %s", toolText(res))
	}
	if in = decode[api.Inbox](t, toolText(toolOK(t, ctx, cs, "read_inbox", nil))); len(in.Items) != 0 {
		t.Errorf("unread after mark_read: %+v", in.Items)
	}
	if in = decode[api.Inbox](t, toolText(toolOK(t, ctx, cs, "read_inbox", map[string]any{"all": true}))); len(in.Items) == 0 {
		t.Errorf("read_inbox all: nothing")
	}

	// Presence: the doorbell's event stream is no wait, wait_inbox is
	// (alice acted just now, so it shows online for 10 s whatever).
	toolOK(t, ctx, cs, "set_presence", map[string]any{"state": "auto"})
	waiting := func() int { return alice.n.Backend().PresenceTable().Agent.Waiting }
	if !strings.Contains(stderr.String(), "following meshd's inbox events") {
		t.Fatalf("the doorbell does not follow the events:\n%s", stderr.String())
	}
	if w := waiting(); w != 0 {
		t.Fatalf("alice counts %d waiting clients with only the MCP doorbell open, want 0", w)
	}
	waited := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_inbox", Arguments: map[string]any{"timeout_seconds": 20}})
		if err != nil {
			waited <- err.Error()
			return
		}
		waited <- toolText(res)
	}()
	if !testwait.Until(10*time.Second, func() bool { return waiting() == 1 }) {
		t.Fatalf("wait_inbox does not count as a client waiting (%d)", waiting())
	}
	if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "wake up"}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waited:
		if !strings.Contains(w, "wake up") {
			t.Errorf("wait_inbox returned %s", w)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wait_inbox did not return on bob's DM")
	}

	// Closing stdin ends the server, with exit status 0 and no signal.
	start = time.Now()
	if err := cs.Close(); err != nil {
		t.Errorf("meshctl mcp after stdin closed: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("meshctl mcp took %s to exit after stdin closed", d)
	}
	if s := stderr.String(); !strings.Contains(s, "stdin closed") {
		t.Errorf("stderr lacks the stop: %s", s)
	}
}

func drain(ch chan string) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestMCPInProcess serves MCP from run() itself, over pipes, against the
// fake meshd: stdout carries only JSON-RPC, meshd's refusals and hints
// become tool errors, the doorbell rings for streamed items and when
// meshd comes back, and closing stdin ends the command with status 0.
func TestMCPInProcess(t *testing.T) {
	t.Parallel()
	f := newFakeEvents(t)
	f.answer("POST /v1/send", 403, api.Error{Error: "role too low: observers may read but not send", Hint: "ask an admin for the member role"})
	// No unread items at first: the doorbell's look at the inbox when it
	// starts to follow the stream then rings nobody. Had it found some, its
	// ring could come before or after the subscription below, and the
	// notifications counted here would depend on that race.
	f.answer("GET /v1/inbox", 200, api.Inbox{})
	f.answer("POST /v1/subscriptions", 200, api.Channel{Name: "ops", Subscription: "muted", CanRead: true})

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		code := run([]string{"--home", f.home, "mcp"}, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	// Every line on stdout must be a JSON-RPC message.
	var stdout syncBuffer
	clientR, serverW := io.Pipe()
	go func() {
		defer serverW.Close()
		io.Copy(io.MultiWriter(serverW, &stdout), outR)
	}()

	updated := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.waitReader(t)
	f.waitRequest(t, "GET /v1/inbox") // the doorbell looks for unread items once it follows the stream
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: inboxURI}); err != nil {
		t.Fatal(err)
	}

	res := callTool(t, ctx, cs, "send_message", map[string]any{"target": "#ops", "body": "hi"})
	if want := "meshd refused: role too low: observers may read but not send\nhint: ask an admin for the member role"; !res.IsError || toolText(res) != want {
		t.Errorf("refusal: error %v, %q; want %q", res.IsError, toolText(res), want)
	}
	wantBody(t, f.one(t, "POST /v1/send"), `{"to":"#ops","body":"hi"}`)
	// Mistakes are caught before meshd is asked.
	for _, args := range []map[string]any{{"target": "#bad!", "body": "x"}, {"target": "@", "body": "x"}, {"target": "bob"}} {
		if res := callTool(t, ctx, cs, "send_message", args); !res.IsError {
			t.Errorf("send_message %v: %q", args, toolText(res))
		}
	}
	if res := callTool(t, ctx, cs, "send_request", map[string]any{"target": "#ops", "intent": "x"}); !res.IsError || !strings.Contains(toolText(res), "channel") {
		t.Errorf("request to a channel: %q", toolText(res))
	}
	f.none(t)
	res = toolOK(t, ctx, cs, "mute", map[string]any{"channel": "#Ops"})
	wantBody(t, f.one(t, "POST /v1/subscriptions"), `{"channel":"ops","state":"muted"}`)
	if toolText(res) != "#ops is now muted" {
		t.Errorf("mute: %q", toolText(res))
	}

	// The doorbell rings for a streamed item and for a lag.
	f.item(t, tailChannel)
	f.lagged()
	for range 2 {
		select {
		case uri := <-updated:
			if uri != inboxURI {
				t.Errorf("update for %q", uri)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no update notification")
		}
	}
	// When meshd comes back the doorbell follows again, and rings for
	// what came meanwhile (the inbox now holds an unread item).
	f.answer("GET /v1/inbox", 200, api.Inbox{Items: []api.Item{tailDM}})
	f.end()
	select {
	case <-updated:
	case <-time.After(10 * time.Second):
		t.Fatal("no update after the event stream came back")
	}

	cs.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("mcp after stdin closed: exit %d\n%s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("mcp did not end when stdin closed")
	}
	for line := range strings.SplitSeq(strings.TrimSpace(stdout.String()), "\n") {
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("stdout line is not JSON-RPC: %q", line)
		}
	}
	if s := stderr.String(); !strings.Contains(s, "not following meshd's inbox events") {
		t.Errorf("stderr does not tell the stream ended:\n%s", s)
	}
}

// TestMCPTypeScriptClient runs an independent client, the official
// TypeScript SDK at the version package-lock.json pins, against the real
// 'meshctl mcp' binary under the newest protocol version that SDK speaks
// (2025-11-25): the tools, the doorbell, wait_inbox, the mesh view and the
// Claude Code channel push. client.mjs says on stdout when bob should
// send something; the test does, and waits for its verdict.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the TypeScript MCP client needs Node.js")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "mcpclient"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("the TypeScript MCP SDK is not installed; run: npm ci --prefix cmd/meshctl/testdata/mcpclient")
	}
	// Not parallel: client.mjs holds the waits to their timeouts.
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := alice.n.Backend().CreateChannel(api.CreateChannel{Name: "general"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.c.Send(ctx, api.Send{To: "#general", Body: "for the history"}); err != nil {
		t.Fatal(err)
	}
	markAllRead(t, ctx, alice)

	cmd := exec.CommandContext(ctx, nodeBin, "client.mjs", bin, alice.home, "bob", "general")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MESH_HOME=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLog := func(substr string) {
		t.Helper()
		if err := pollUntil(ctx, fmt.Sprintf("%q in the server's log", substr), func() bool { return strings.Contains(stderr.String(), substr) }); err != nil {
			t.Error(err)
		}
	}
	dm := func(body string) {
		t.Helper()
		if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: body}); err != nil {
			t.Error(err)
		}
	}
	var verdict string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var p struct{ Phase string }
		json.Unmarshal([]byte(line), &p)
		switch p.Phase {
		case "subscribed":
			dm("ding from the peer")
		case "waiting":
			waitLog("wait_inbox: waiting") // the wait began: what bob sends now comes during it
			dm("during the wait")
		case "channel":
			waitLog("claude/channel: client ready")
			dm("pushed to the channel")
		default:
			verdict = line
		}
	}
	err = cmd.Wait()
	if err != nil || !strings.Contains(verdict, `"ok":true`) {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr:\n%s", err, verdict, stderr.String())
	}
	t.Logf("client.mjs: %s", verdict)
	if !strings.Contains(verdict, `"version":"2025-11-25"`) || !strings.Contains(verdict, fmt.Sprintf(`"tools":%d`, len(mcpTools))) {
		t.Errorf("client.mjs verdict: %s", verdict)
	}
	if _, err := waitItem(ctx, bob, func(it api.Item) bool { return it.Body == "hello from the TypeScript SDK" }); err != nil {
		t.Fatal(err)
	}
}
