package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

const usageHistory = `usage: meshctl history '#NAME' [--since D] [--limit N] [--json]
       meshctl history @PEER [--since D] [--limit N] [--json]

List the messages of channel NAME that this node's store holds, oldest
first: what it received live, what it caught up on through history sync
(marked [from history]), and what it sent. The store keeps a channel's
messages whether or not this node subscribes to it, for as long as the
channel's retention says (by default 72 hours or 10,000 messages,
whichever keeps fewer; archive nodes keep longer).

Each message is one line, long or multi-line bodies follow indented:

  2026-11-21 12:00:05 alice seq=12 id=ID: v1.4.2 is live

flags:
  --since D   only messages sent in the last D (such as 90m, 72h or 3d),
              or since an RFC 3339 time (2026-11-21T12:00:00Z)
  --limit N   the newest N messages (default 100, at most 10000)

With @PEER, list the conversation with one member, both ways, oldest
first: the direct messages, requests and responses it sent this node and
those this node sent it (marked "->", with their delivery state). The
store keeps them for the direct-message retention (72 h by default).

  2026-11-21 12:00:05 <- bob id=ID: are the tests green?
  2026-11-21 12:00:09 -> bob id=ID [delivered]: yes, 412 passed

Quote '#NAME': in a shell, an unquoted # starts a comment.

examples:
  meshctl history '#deploys' --since 24h
  meshctl history '#deploys' --limit 500 --json
  meshctl history @bob --since 24h
`

// historyFlags are the flags of 'meshctl history'.
type historyFlags struct {
	since string
	limit int
}

func (fl *historyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&fl.since, "since", "", "")
	fs.IntVar(&fl.limit, "limit", 0, "")
}

func runHistory(a *app, fl *historyFlags, pos []string) error {
	if len(pos) == 0 {
		return a.usageErrorf("missing '#NAME' (quote '#NAME': an unquoted # starts a shell comment)")
	}
	if err := a.nargs(pos, 1, 1); err != nil {
		return err
	}
	if peer, ok := strings.CutPrefix(pos[0], "@"); ok {
		return a.conversation(peer, fl.since, fl.limit)
	}
	name, err := a.channelArg(pos[0])
	if err != nil {
		return err
	}
	if _, err := api.ParseSince(fl.since, time.Now()); err != nil {
		return a.usageErrorf("--%v", err)
	}
	if fl.limit < 0 || fl.limit > api.MaxHistoryLimit {
		return a.usageErrorf("--limit must be from 1 to %d", api.MaxHistoryLimit)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	h, err := a.client().History(ctx, api.HistoryQuery{Channel: name, Since: fl.since, Limit: fl.limit})
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(h)
	}
	var b strings.Builder
	if len(h.Messages) == 0 {
		fmt.Fprintf(&b, "no messages of #%s in the store\n", printable(h.Channel, false))
	}
	for i := range h.Messages {
		writeHistoryMessage(&b, &h.Messages[i])
	}
	if n := len(h.Messages); n > 0 && h.Stored > n {
		fmt.Fprintf(&b, "(the newest %d of %d stored; see --limit and --since)\n", n, h.Stored)
	}
	_, err = fmt.Fprint(a.Stdout, b.String())
	return err
}

// writeHistoryMessage writes one stored message in the text form.
func writeHistoryMessage(b *strings.Builder, m *api.HistoryMessage) {
	fmt.Fprintf(b, "%s %s seq=%d id=%s", m.Sent.Local().Format(timeLayout), printable(partyName(m.From), false), m.Seq, fieldValue(m.ID))
	if m.InReplyTo != "" {
		fmt.Fprintf(b, " in_reply_to=%s", fieldValue(m.InReplyTo))
	}
	if m.FromHistory {
		b.WriteString(" [from history]")
	}
	body := strings.TrimRight(strings.ReplaceAll(m.Body, "\r\n", "\n"), "\n")
	switch {
	case body == "":
		b.WriteString(": (empty)\n")
	case !strings.ContainsAny(body, "\r\n") && len(body) <= inlineBytes:
		b.WriteString(": " + printable(body, false) + "\n")
	default:
		b.WriteString(":\n")
		for line := range strings.SplitSeq(printable(body, true), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
}

// conversation is meshctl history @PEER.
func (a *app) conversation(peer, since string, limit int) error {
	if peer == "" {
		return a.usageErrorf("@PEER: name a member after the @")
	}
	if _, err := api.ParseSince(since, time.Now()); err != nil {
		return a.usageErrorf("--%v", err)
	}
	if limit < 0 || limit > api.MaxHistoryLimit {
		return a.usageErrorf("--limit must be from 1 to %d", api.MaxHistoryLimit)
	}
	ctx, cancel := a.ctx()
	defer cancel()
	c, err := a.client().Conversation(ctx, peer, since, limit)
	if err != nil {
		return a.remoteErr(err)
	}
	if a.json {
		return a.printJSON(c)
	}
	var b strings.Builder
	if len(c.Entries) == 0 {
		fmt.Fprintf(&b, "nothing between this node and %s in the store\n", printable(partyLabel(c.Peer), false))
	}
	for i := range c.Entries {
		writeConversationEntry(&b, &c.Entries[i], c.Peer)
	}
	_, err = fmt.Fprint(a.Stdout, b.String())
	return err
}

// writeConversationEntry writes one envelope of a conversation.
func writeConversationEntry(b *strings.Builder, e *api.ConversationEntry, peer api.Party) {
	dir := "<-"
	if e.Out {
		dir = "->"
	}
	fmt.Fprintf(b, "%s %s %s id=%s", e.Sent.Local().Format(timeLayout), dir, printable(partyName(peer), false), fieldValue(e.ID))
	body := e.Body
	switch e.Kind {
	case "request":
		fmt.Fprintf(b, " request intent=%s request_id=%s", fieldValue(e.Intent), fieldValue(e.RequestID))
		body = string(e.Params)
	case "response":
		fmt.Fprintf(b, " response status=%s request_id=%s", fieldValue(e.Status), fieldValue(e.RequestID))
		body = string(e.Result)
	}
	if e.InReplyTo != "" {
		fmt.Fprintf(b, " in_reply_to=%s", fieldValue(e.InReplyTo))
	}
	if e.Out && e.Delivery != "" {
		fmt.Fprintf(b, " [%s]", printable(e.Delivery, false))
	}
	if !e.Out && !e.Read {
		b.WriteString(" [unread]")
	}
	body = strings.TrimRight(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	switch {
	case body == "":
		b.WriteString("\n")
	case !strings.ContainsAny(body, "\r\n") && len(body) <= inlineBytes:
		b.WriteString(": " + printable(body, false) + "\n")
	default:
		b.WriteString(":\n")
		for line := range strings.SplitSeq(printable(body, true), "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
}
