package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meshd/meshd/node/api"
)

// The Claude Code channel push (meshctl mcp --claude-channel): the server
// declares the experimental capability "claude/channel" and sends each
// unread waking item once as a notifications/claude/channel notification,
// which Claude Code turns into a model turn. The SDK sends only the
// notifications the specification names, so these are written on the
// session's connection directly, between the SDK's own messages.

const (
	claudeChannelCap    = "claude/channel"
	claudeChannelMethod = "notifications/claude/channel"
	// claudeChannelMaxContent bounds the content of one notification;
	// read_inbox shows the whole item.
	claudeChannelMaxContent = 32 << 10
	// claudeChannelRemember bounds the item ids remembered as pushed.
	claudeChannelRemember = 4096
)

// claudeChannelInstructions is added to the server's instructions when
// the push is on.
const claudeChannelInstructions = ` Items also arrive on their own as <channel source="meshd" ...> events: ` +
	`the content is the item's body (or the request or response), and the attributes name it ` +
	`(item_id, kind, from, channel, request_id, intent, status). ` +
	`Handle the item, call mark_read with its item_id, and answer with send_message or send_response.`

// claudeChannelParams is the params object of one notification.
type claudeChannelParams struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// claudeChannel pushes waking items to the one client of the stdio
// session. Its run goroutine owns pushed and order.
type claudeChannel struct {
	c   *api.Client
	log *slog.Logger

	mu   sync.Mutex
	conn mcp.Connection // set when the transport connects

	readyOnce sync.Once
	ready     chan struct{} // closed once the client has initialized
	kick      chan struct{} // something arrived: look at the inbox

	pushed map[string]bool
	order  []string
}

func newClaudeChannel(c *api.Client, log *slog.Logger) *claudeChannel {
	return &claudeChannel{c: c, log: log, ready: make(chan struct{}), kick: make(chan struct{}, 1), pushed: map[string]bool{}}
}

// transport wraps t so that the push can write on its connection.
func (ch *claudeChannel) transport(t mcp.Transport) mcp.Transport {
	return channelTransport{t, ch}
}

type channelTransport struct {
	mcp.Transport
	ch *claudeChannel
}

func (t channelTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err == nil {
		t.ch.mu.Lock()
		t.ch.conn = conn
		t.ch.mu.Unlock()
	}
	return conn, err
}

// middleware notes when the client is ready for notifications: once it
// sent notifications/initialized, or, under the stateless protocol that
// has no handshake, any request but server/discover.
func (ch *claudeChannel) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		switch {
		case method == "notifications/initialized",
			method != "initialize" && method != "server/discover" && !strings.HasPrefix(method, "notifications/"):
			ch.readyOnce.Do(func() {
				ch.log.Debug("claude/channel: client ready", "after", method)
				close(ch.ready)
			})
		}
		return res, err
	}
}

// ring tells the push to look at the inbox.
func (ch *claudeChannel) ring() {
	select {
	case ch.kick <- struct{}{}:
	default:
	}
}

// run pushes the unread waking items not yet pushed, once the client is
// ready and then whenever rung, until ctx ends.
func (ch *claudeChannel) run(ctx context.Context) {
	select {
	case <-ch.ready:
	case <-ctx.Done():
		return
	}
	for {
		ch.pushUnread(ctx)
		select {
		case <-ch.kick:
		case <-ctx.Done():
			return
		}
	}
}

func (ch *claudeChannel) pushUnread(ctx context.Context) {
	in, err := call(ctx, func(ctx context.Context) (*api.Inbox, error) { return ch.c.Inbox(ctx, api.InboxQuery{}) })
	if err != nil {
		if ctx.Err() == nil {
			ch.log.Warn("claude/channel: cannot read the inbox", "err", err)
		}
		return
	}
	for _, it := range wakingItems(in.Items) {
		if ch.pushed[it.ID] {
			continue
		}
		if err := ch.push(ctx, &it); err != nil {
			if ctx.Err() == nil {
				ch.log.Warn("claude/channel: cannot send", "id", it.ID, "err", err)
			}
			return
		}
		ch.remember(it.ID)
	}
}

// remember notes id as pushed, forgetting the oldest beyond the bound.
func (ch *claudeChannel) remember(id string) {
	ch.pushed[id] = true
	ch.order = append(ch.order, id)
	if len(ch.order) > claudeChannelRemember {
		delete(ch.pushed, ch.order[0])
		ch.order = ch.order[1:]
	}
}

func (ch *claudeChannel) push(ctx context.Context, it *api.Item) error {
	ch.mu.Lock()
	conn := ch.conn
	ch.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("no client connected")
	}
	b, err := json.Marshal(channelNotice(it))
	if err != nil {
		return err
	}
	ch.log.Debug("claude/channel: push", "id", it.ID, "kind", it.Kind)
	return conn.Write(ctx, &jsonrpc.Request{Method: claudeChannelMethod, Params: b})
}

// channelNotice is the notification for one item: its text as content,
// and what names it as meta (string values, identifier keys).
func channelNotice(it *api.Item) *claudeChannelParams {
	meta := map[string]string{"item_id": it.ID, "kind": it.Kind, "from": orElse(it.From.Name, it.From.Fingerprint),
		"from_fingerprint": it.From.Fingerprint, "to": it.To, "priority": it.Priority}
	set := func(k, v string) {
		if v != "" {
			meta[k] = v
		}
	}
	set("channel", it.Channel)
	set("in_reply_to", it.InReplyTo)
	set("request_id", it.RequestID)
	set("intent", it.Intent)
	set("reply_to", it.ReplyTo)
	set("status", it.Status)
	set("subagent_id", it.SubagentID)
	if it.Hop != nil {
		meta["hop"] = strconv.Itoa(*it.Hop)
	}
	var content string
	switch it.Kind {
	case "request":
		content = fmt.Sprintf("request %q (request_id %s); params: %s", it.Intent, it.RequestID, orElse(compactJSON(it.Params), "{}"))
	case "response":
		content = fmt.Sprintf("response %s to request %s; result: %s", it.Status, it.RequestID, orElse(compactJSON(it.Result), "null"))
	case api.KindSubagentResult:
		content = fmt.Sprintf("subagent %s finished: %s; result: %s", it.SubagentID, it.Summary, orElse(compactJSON(it.Result), "null"))
	default:
		content = it.Body
	}
	if len(content) > claudeChannelMaxContent {
		cut := claudeChannelMaxContent
		for cut > 0 && !utf8Start(content[cut]) {
			cut--
		}
		content = content[:cut] + "\n[cut at 32 KiB: read_inbox shows the whole item]"
	}
	return &claudeChannelParams{Content: content, Meta: meta}
}

// utf8Start reports whether b starts a UTF-8 sequence.
func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// compactJSON is raw without insignificant space, or raw as is when it is
// not JSON.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
