package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
)

// mcpVersions are the protocol versions 'meshctl mcp' is tested under:
// the current one, stateless with subscriptions/listen, and the one
// before, with initialize and resources/subscribe.
var mcpVersions = []string{"2026-07-28", "2025-11-25"}

// mcpSession is one 'meshctl mcp' process driven by the Go SDK's client.
type mcpSession struct {
	cs      *mcp.ClientSession
	stderr  *syncBuffer
	updated chan string              // notifications/resources/updated
	acked   chan struct{}            // notifications/subscriptions/acknowledged
	pushed  chan claudeChannelParams // notifications/claude/channel
}

// startMCP starts 'meshctl --home HOME mcp --log-level debug FLAGS...' and
// connects the Go SDK's client to it under the protocol version.
func startMCP(t *testing.T, ctx context.Context, bin, home, version string, flags ...string) *mcpSession {
	t.Helper()
	s := &mcpSession{stderr: &syncBuffer{}, updated: make(chan string, 64), acked: make(chan struct{}, 8), pushed: make(chan claudeChannelParams, 64)}
	client := mcp.NewClient(&mcp.Implementation{Name: "meshctl-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { s.updated <- req.Params.URI },
	})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				s.acked <- struct{}{}
			}
			return next(ctx, method, req)
		}
	})
	cmd := exec.Command(bin, append([]string{"--home", home, "mcp", "--log-level", "debug"}, flags...)...)
	cmd.Env = append(os.Environ(), "MESH_HOME=")
	cmd.Stderr = s.stderr
	cs, err := client.Connect(ctx, &tapTransport{Transport: &mcp.CommandTransport{Command: cmd}, pushed: s.pushed}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	s.cs = cs
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("meshctl mcp stderr:\n%s", s.stderr.String())
		}
	})
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %q, want %q", got, version)
	}
	return s
}

// waitLog waits until the server's stderr holds substr n times.
func (s *mcpSession) waitLog(t *testing.T, ctx context.Context, substr string, n int) {
	t.Helper()
	if err := pollUntil(ctx, fmt.Sprintf("%d× %q in meshctl mcp's log", n, substr), func() bool {
		return strings.Count(s.stderr.String(), substr) >= n
	}); err != nil {
		t.Fatal(err)
	}
}

// tapTransport hands the client's connection through, and takes out the
// notifications/claude/channel notifications the SDK does not know.
type tapTransport struct {
	mcp.Transport
	pushed chan claudeChannelParams
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, pushed: t.pushed}, nil
}

type tapConn struct {
	mcp.Connection
	pushed chan claudeChannelParams
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == claudeChannelMethod {
			var p claudeChannelParams
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return nil, fmt.Errorf("%s params %s: %w", req.Method, req.Params, err)
			}
			c.pushed <- p
			continue
		}
		return msg, err
	}
}

// markAllRead marks every unread item of d's inbox read.
func markAllRead(t *testing.T, ctx context.Context, d *demoNode) {
	t.Helper()
	in, err := d.c.Inbox(ctx, api.InboxQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Items {
		if _, err := d.c.MarkRead(ctx, it.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMCPVersions drives the real 'meshctl mcp' with the Go SDK's client
// under each protocol version, against real nodes: the doorbell rings,
// wait_inbox returns an item sent during the wait, returns nothing at its
// timeout and ends when the client cancels it, and the mesh view tools
// return the mesh's data.
func TestMCPVersions(t *testing.T) {
	t.Parallel()
	// Not parallel: it holds the doorbell to ringing within 5 s.
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := alice.n.Backend().CreateChannel(api.CreateChannel{Name: "general"}); err != nil {
		t.Fatal(err)
	}
	hist, err := alice.c.Send(ctx, api.Send{To: "#general", Body: "for the history"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.SetPresence(ctx, "online"); err != nil {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, "bob online in alice's presence table", func() bool {
		p, err := alice.c.Presence(ctx)
		return err == nil && slices.ContainsFunc(p.Entries, func(e api.PresenceEntry) bool { return e.Name == "bob" && e.State == "online" })
	}); err != nil {
		t.Fatal(err)
	}
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			s := startMCP(t, ctx, bin, alice.home, version)
			testMCPDoorbell(t, ctx, s, version, alice, bob)
			testMCPWait(t, ctx, s, version, alice, bob)
			testMCPView(t, ctx, s, hist.ID, bob)
		})
	}
}

func testMCPDoorbell(t *testing.T, ctx context.Context, s *mcpSession, version string, alice, bob *demoNode) {
	if err := s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: inboxURI}); err != nil {
		t.Fatal(err)
	}
	if version >= "2026-07-28" {
		// subscriptions/listen: subscribed once the server acknowledged.
		select {
		case <-s.acked:
		case <-ctx.Done():
			t.Fatal("no notifications/subscriptions/acknowledged")
		}
	} else if len(s.acked) > 0 {
		t.Errorf("subscriptions/acknowledged under %s", version)
	}
	drain(s.updated)
	body := "ding dong " + version
	start := time.Now()
	if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: body}); err != nil {
		t.Fatal(err)
	}
	for rang := false; !rang; {
		select {
		case uri := <-s.updated:
			if uri != inboxURI {
				t.Fatalf("update for %q", uri)
			}
			rr, err := s.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: inboxURI})
			if err != nil {
				t.Fatal(err)
			}
			rang = strings.Contains(rr.Contents[0].Text, body)
		case <-time.After(5*time.Second - time.Since(start)):
			t.Fatalf("no notifications/resources/updated within 5 s of the DM under %s", version)
		}
	}
	t.Logf("doorbell rang %s after the DM", time.Since(start).Round(time.Millisecond))
	if err := s.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: inboxURI}); err != nil {
		t.Fatal(err)
	}
	// Unsubscribed: a further DM rings nobody (the SDK logs whom it told).
	s.waitLog(t, ctx, `msg="resource unsubscribed"`, 1)
	none := strings.Count(s.stderr.String(), "subscriber_count=0")
	if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "after the unsubscribe"}); err != nil {
		t.Fatal(err)
	}
	s.waitLog(t, ctx, "subscriber_count=0", none+1)
	markAllRead(t, ctx, alice)
}

func testMCPWait(t *testing.T, ctx context.Context, s *mcpSession, version string, alice, bob *demoNode) {
	markAllRead(t, ctx, alice)
	waits := strings.Count(s.stderr.String(), "wait_inbox: waiting")

	// An item sent while the call waits ends it with that item.
	type answer struct {
		res *mcp.CallToolResult
		err error
		d   time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		start := time.Now()
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_inbox", Arguments: map[string]any{"timeout_seconds": 60}})
		got <- answer{res, err, time.Since(start)}
	}()
	s.waitLog(t, ctx, "wait_inbox: waiting", waits+1)
	body := "during the wait " + version
	if _, err := bob.c.Send(ctx, api.Send{To: "alice", Body: body}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.res.IsError {
		t.Fatalf("wait_inbox: %v %q", a.err, toolText(a.res))
	}
	out := structured[waitInboxOut](t, a.res)
	if out.TimedOut || len(out.Items) != 1 || out.Items[0].Body != body || out.Items[0].Read || a.d > 30*time.Second {
		t.Fatalf("wait_inbox after %s: %+v", a.d, out)
	}
	if text := toolText(a.res); !strings.Contains(text, body) {
		t.Errorf("wait_inbox text lacks the item: %q", text)
	}
	t.Logf("wait_inbox returned %s after the wait began", a.d.Round(time.Millisecond))

	// The unread item ends the next wait at once; mark_read there marks it.
	res := toolOK(t, ctx, s.cs, "wait_inbox", map[string]any{"timeout_seconds": 30, "mark_read": true})
	if out := structured[waitInboxOut](t, res); len(out.Items) != 1 || !out.Items[0].Read {
		t.Fatalf("wait_inbox mark_read: %+v", out)
	}

	// Nothing unread: empty at the timeout.
	start := time.Now()
	res = toolOK(t, ctx, s.cs, "wait_inbox", map[string]any{"timeout_seconds": 1})
	if out := structured[waitInboxOut](t, res); !out.TimedOut || out.Items == nil || len(out.Items) != 0 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("wait_inbox at its timeout, after %s: %s", time.Since(start), toolText(res))
	}

	// The client cancels: the wait ends at once, and the session goes on.
	waits = strings.Count(s.stderr.String(), "wait_inbox: waiting")
	cctx, cancelCall := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "wait_inbox", Arguments: map[string]any{"timeout_seconds": 600}})
		errc <- err
	}()
	s.waitLog(t, ctx, "wait_inbox: waiting", waits+1)
	// Counted before the cancel: the server may log it before the call
	// returns here.
	cancels := strings.Count(s.stderr.String(), "wait_inbox: cancelled by the client")
	cancelCall()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait_inbox: %v", err)
	}
	s.waitLog(t, ctx, "wait_inbox: cancelled by the client", cancels+1)
	toolOK(t, ctx, s.cs, "list_channels", nil)

	// Bad timeouts are tool errors.
	for _, secs := range []int{-1, 601} {
		if res := callTool(t, ctx, s.cs, "wait_inbox", map[string]any{"timeout_seconds": secs}); !res.IsError {
			t.Errorf("wait_inbox %d s: %q", secs, toolText(res))
		}
	}
}

func testMCPView(t *testing.T, ctx context.Context, s *mcpSession, histID string, bob *demoNode) {
	peers := structured[mcpPeers](t, toolOK(t, ctx, s.cs, "list_peers", nil))
	if len(peers.Peers) != 2 {
		t.Fatalf("list_peers: %+v", peers)
	}
	if p := peers.Peers[0]; p.Name != "bob" && !(p.Self && p.Presence == "online") {
		t.Errorf("list_peers puts online members first: %+v", peers.Peers)
	}
	i := slices.IndexFunc(peers.Peers, func(p mcpPeer) bool { return p.Name == "bob" })
	if i < 0 {
		t.Fatalf("list_peers lacks bob: %+v", peers)
	}
	if p := peers.Peers[i]; p.Role != "member" || p.Presence != "online" || !p.Linked || p.LastHeard == nil || p.Self || p.Fingerprint != bob.id.Pub.Fingerprint() {
		t.Errorf("list_peers bob: %+v", p)
	}
	if j := slices.IndexFunc(peers.Peers, func(p mcpPeer) bool { return p.Self }); j < 0 || peers.Peers[j].Name != "alice" || peers.Peers[j].Role != "admin" {
		t.Errorf("list_peers self: %+v", peers.Peers)
	}

	chans := structured[mcpChannels](t, toolOK(t, ctx, s.cs, "list_channels", nil))
	if !slices.ContainsFunc(chans.Channels, func(c mcpChannel) bool { return c.Name == "general" && c.CanRead && c.CanWrite }) {
		t.Errorf("list_channels: %+v", chans)
	}

	h := structured[mcpHistory](t, toolOK(t, ctx, s.cs, "read_history", map[string]any{"channel": "#General", "since": "1h"}))
	if h.Channel != "general" || !slices.ContainsFunc(h.Messages, func(m api.HistoryMessage) bool { return m.ID == histID && m.Body == "for the history" }) {
		t.Errorf("read_history: %+v", h)
	}
	h = structured[mcpHistory](t, toolOK(t, ctx, s.cs, "read_history", map[string]any{"channel": "general", "since": time.Now().Add(time.Hour).Format(time.RFC3339)}))
	if len(h.Messages) != 0 || h.Messages == nil {
		t.Errorf("read_history since an hour ahead: %+v", h)
	}
	for _, args := range []map[string]any{
		{"channel": "nosuch"},                     // meshd refuses
		{"channel": "bad name!"},                  // refused before meshd is asked
		{"channel": "general", "since": "lately"}, // refused before meshd is asked
		{"channel": "general", "limit": 501},      // the schema refuses
	} {
		if res := callTool(t, ctx, s.cs, "read_history", args); !res.IsError {
			t.Errorf("read_history %v: %q", args, toolText(res))
		}
	}
	if res := callTool(t, ctx, s.cs, "read_history", map[string]any{"channel": "nosuch"}); !strings.HasPrefix(toolText(res), "meshd refused: ") {
		t.Errorf("read_history of no channel: %q", toolText(res))
	}

	// mark_read: an item DMed now, then read; an unknown id is refused.
	sent, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "mark me"})
	if err != nil {
		t.Fatal(err)
	}
	waits := toolOK(t, ctx, s.cs, "wait_inbox", map[string]any{"timeout_seconds": 30})
	if out := structured[waitInboxOut](t, waits); len(out.Items) != 1 || out.Items[0].ID != sent.ID {
		t.Fatalf("wait_inbox before mark_read: %+v", out)
	}
	it := structured[api.Item](t, toolOK(t, ctx, s.cs, "mark_read", map[string]any{"id": sent.ID}))
	if it.ID != sent.ID || !it.Read || it.Body != "mark me" {
		t.Errorf("mark_read: %+v", it)
	}
	for _, id := range []string{"", "0193a0c4-0000-7000-8000-000000000000"} {
		if res := callTool(t, ctx, s.cs, "mark_read", map[string]any{"id": id}); !res.IsError {
			t.Errorf("mark_read %q: %q", id, toolText(res))
		}
	}
}

// nextPush returns the next channel notification, failing after 10 s.
func (s *mcpSession) nextPush(t *testing.T) claudeChannelParams {
	t.Helper()
	select {
	case p := <-s.pushed:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/claude/channel within 10 s")
	}
	panic("unreachable")
}

// TestMCPClaudeChannel drives 'meshctl mcp --claude-channel' under each
// protocol version (Claude Code speaks 2025-11-25): the capability is declared, each
// unread waking item is pushed once as notifications/claude/channel (the
// one waiting before the client came too), and what does not wake (a
// muted channel's message) is not pushed. Without the flag nothing is
// declared.
func TestMCPClaudeChannel(t *testing.T) {
	t.Parallel()
	bin := buildMeshctl(t)
	m := startMCPMesh(t)
	alice, bob := m.node("alice"), m.node("bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := alice.n.Backend().CreateChannel(api.CreateChannel{Name: "noisy"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.c.Subscribe(ctx, api.Subscribe{Channel: "noisy", State: "muted"}); err != nil {
		t.Fatal(err)
	}
	if err := pollUntil(ctx, "#noisy known to bob", func() bool { _, err := bob.c.Channel(ctx, "noisy"); return err == nil }); err != nil {
		t.Fatal(err)
	}
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			markAllRead(t, ctx, alice)
			plain := startMCP(t, ctx, bin, alice.home, version)
			if ir := plain.cs.InitializeResult(); ir.Capabilities.Experimental != nil || strings.Contains(ir.Instructions, "<channel") {
				t.Errorf("without --claude-channel: experimental %v", ir.Capabilities.Experimental)
			}
			early, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "before the client came"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := waitItem(ctx, alice, func(it api.Item) bool { return it.ID == early.ID }); err != nil {
				t.Fatal(err)
			}

			s := startMCP(t, ctx, bin, alice.home, version, "--claude-channel")
			ir := s.cs.InitializeResult()
			if _, ok := ir.Capabilities.Experimental[claudeChannelCap]; !ok || !strings.Contains(ir.Instructions, "<channel") {
				t.Fatalf("with --claude-channel: experimental %v, instructions %q", ir.Capabilities.Experimental, ir.Instructions)
			}
			if version >= "2026-07-28" {
				// No handshake: the push starts with the client's first request.
				toolOK(t, ctx, s.cs, "list_channels", nil)
			}
			if p := s.nextPush(t); p.Content != "before the client came" || p.Meta["item_id"] != early.ID || p.Meta["kind"] != "message" ||
				p.Meta["from"] != "bob" || p.Meta["from_fingerprint"] != bob.id.Pub.Fingerprint() || p.Meta["to"] != "@alice" {
				t.Errorf("push of the waiting item: %+v", p)
			}

			// A muted channel's message does not wake, so it is not pushed; the
			// DM after it is, and the item pushed before is not pushed again.
			muted, err := bob.c.Send(ctx, api.Send{To: "#noisy", Body: "not worth a turn"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := waitItem(ctx, alice, func(it api.Item) bool { return it.ID == muted.ID }); err != nil {
				t.Fatal(err)
			}
			dm, err := bob.c.Send(ctx, api.Send{To: "alice", Body: "worth a turn"})
			if err != nil {
				t.Fatal(err)
			}
			if p := s.nextPush(t); p.Meta["item_id"] != dm.ID || p.Content != "worth a turn" {
				t.Errorf("push after the muted message: %+v (muted %s, dm %s)", p, muted.ID, dm.ID)
			}

			// A request: its intent and params are the content, its ids the meta.
			rq, err := alice.c.Request(ctx, api.Request{To: "bob", Intent: "ping"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := waitItem(ctx, bob, func(it api.Item) bool { return it.RequestID == rq.RequestID }); err != nil {
				t.Fatal(err)
			}
			if _, err := bob.c.Respond(ctx, api.Respond{RequestID: rq.RequestID, Status: "completed", Result: json.RawMessage(`{"pong":true}`)}); err != nil {
				t.Fatal(err)
			}
			p := s.nextPush(t)
			if p.Meta["kind"] != "response" || p.Meta["request_id"] != rq.RequestID || p.Meta["status"] != "completed" ||
				!strings.Contains(p.Content, `{"pong":true}`) {
				t.Errorf("push of a response: %+v", p)
			}
			select {
			case p := <-s.pushed:
				t.Errorf("pushed again: %+v", p)
			default:
			}
			if len(plain.pushed) != 0 {
				t.Errorf("pushed without --claude-channel: %+v", <-plain.pushed)
			}
		})
	}
}

// TestMCPWaitProgress serves MCP from run() itself against a real node:
// a wait_inbox call that asks for progress gets progress notifications
// while it waits (so hosts that reset their timeout on progress let it
// run), and a call that does not ask gets none.
func TestMCPWaitProgress(t *testing.T) {
	t.Parallel()
	// Not parallel: it shortens the progress interval.
	defer func(d time.Duration) { waitInboxProgress = d }(waitInboxProgress)
	waitInboxProgress = 100 * time.Millisecond
	m := startMCPMesh(t)
	alice := m.node("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	markAllRead(t, ctx, alice)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		code := run([]string{"--home", alice.home, "mcp"}, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "wait_inbox", Arguments: map[string]any{"timeout_seconds": 1}}
	params.SetProgressToken("w1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("wait_inbox: %v %q", err, toolText(res))
	}
	if out := structured[waitInboxOut](t, res); !out.TimedOut {
		t.Errorf("wait_inbox: %+v", out)
	}
	if len(progress) == 0 {
		t.Fatal("no progress notification during a 1 s wait with a 100 ms interval")
	}
	p := <-progress
	if p.ProgressToken != "w1" || p.Total != 1 || p.Progress <= 0 || p.Message == "" {
		t.Errorf("progress %+v", p)
	}
	drainProgress := func() int {
		n := 0
		for len(progress) > 0 {
			<-progress
			n++
		}
		return n
	}
	drainProgress()
	toolOK(t, ctx, cs, "wait_inbox", map[string]any{"timeout_seconds": 1})
	if n := drainProgress(); n != 0 {
		t.Errorf("%d progress notifications for a call that asked for none", n)
	}
	cs.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("mcp exit %d\n%s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("mcp did not end when stdin closed")
	}
}

// TestMCPToolsWithoutMeshd: with no meshd running, wait_inbox and the
// view tools answer at once with a tool error saying how to start it.
func TestMCPToolsWithoutMeshd(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		code := run([]string{"--home", dir, "mcp"}, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"wait_inbox", map[string]any{"timeout_seconds": 30}},
		{"list_peers", nil},
		{"find_agents", nil},
		{"list_channels", nil},
		{"read_history", map[string]any{"channel": "general"}},
		{"mark_read", map[string]any{"id": "0193a0c4-0000-7000-8000-000000000000"}},
	} {
		start := time.Now()
		res := callTool(t, ctx, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(toolText(res), "hint: start it with: meshd --home "+dir) || time.Since(start) > 5*time.Second {
			t.Errorf("%s without meshd, after %s: %q", c.tool, time.Since(start), toolText(res))
		}
	}
	cs.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("mcp did not end when stdin closed")
	}
}
