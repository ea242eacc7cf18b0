package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famSubagent = newFamily("meshd_subagent_results_total", "Subagent results posted to this node's own inbox (local only, never sent).")

	cInboxSubagentRefused = newEvent("inbox.subagent_refused")
	cInboxSubagentResults = newCounter("inbox.subagent_results", famSubagent)
)

// Subagent results (docs/AGENTS.md "Subagent results"; seed 004's
// SubagentResult): a local worker of the agent reports back through the
// agent's own inbox. The item is a Message this node signs to itself,
// stored and mirrored like any item, at high priority so that it wakes
// every wait. It is local only: it is never queued, sent, served in
// history sync or taken from a link (drop.local_only).

// Limits of a subagent result.
const (
	MaxSubagentID      = 128
	MaxSubagentSummary = 8 << 10
)

// PostSubagentResult puts a subagent's result in this node's inbox.
func (n *Node) PostSubagentResult(req api.SubagentResult) (api.Item, error) {
	n.own.Acted()
	if err := checkSubagentResult(req); err != nil {
		n.metrics.inc(cInboxSubagentRefused)
		return api.Item{}, err
	}
	body, err := mailbox.SubagentBody(mailbox.Subagent{ID: req.SubagentID, Summary: req.Summary, Result: req.Result})
	if err != nil {
		return api.Item{}, badRequest("result: %v", err)
	}
	if len(body) > proto.MaxBodySize {
		return api.Item{}, refuse(http.StatusBadRequest, "put the result in a file and give its path in the result",
			"subagent result of %d bytes exceeds the message limit of 256 KiB (%d bytes)", len(body), proto.MaxBodySize)
	}
	se, err := n.out.Sign(proto.ToPeer(n.id.Pub), proto.KindMessage, n.cfg.OfflineWindow, func(e *proto.Envelope) {
		e.Message = &proto.Message{Body: body}
	})
	if err != nil {
		return api.Item{}, err
	}
	out, err := n.store.Deliver([]history.Delivery{{Env: se, Inbox: true, Priority: history.PriorityHigh, Wakes: true}})
	if err != nil {
		return api.Item{}, err
	}
	if out[0] != history.Added {
		return api.Item{}, refuse(http.StatusInsufficientStorage, "read and let retention remove older items, or raise sender_store_mib",
			"this node's store holds as much of its own as it may: the result was not kept")
	}
	now := time.Now()
	n.metrics.inc(cInboxItems)
	n.metrics.inc(cInboxSubagentResults)
	n.onInbox(inboxDelivery{se: se, prio: history.PriorityHigh, wakes: true, at: now})
	x := n.renderEnvelope(se, history.InboxItem{Meta: history.Meta{ID: se.ID}, Priority: history.PriorityHigh, Wakes: true, Delivered: now})
	n.inbox.notify(true)
	return x, nil
}

func checkSubagentResult(req api.SubagentResult) error {
	switch {
	case req.SubagentID == "" || len(req.SubagentID) > MaxSubagentID:
		return badRequest("subagent id of %d bytes: want 1 to %d", len(req.SubagentID), MaxSubagentID)
	case !utf8.ValidString(req.SubagentID) || !printableLine(req.SubagentID):
		return badRequest("subagent id %q: want text on one line, without control characters", req.SubagentID)
	case req.Summary == "" || len(req.Summary) > MaxSubagentSummary:
		return refuse(http.StatusBadRequest, "keep the summary short; put detail in the result",
			"summary of %d bytes: want 1 to %d", len(req.Summary), MaxSubagentSummary)
	case !utf8.ValidString(req.Summary):
		return badRequest("summary is not valid UTF-8")
	case len(bytes.TrimSpace(req.Result)) > 0 && !json.Valid(req.Result):
		return badRequest("result is not valid JSON")
	}
	return nil
}

func printableLine(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// isLocalItem reports whether se is an item this node signed to itself
// (a subagent result).
func (n *Node) isLocalItem(se *proto.SignedEnvelope) bool {
	return mailbox.IsLocal(&se.Envelope) && se.From.Equal(n.id.Pub)
}

// renderSubagent fills x, the rendering of a subagent result, from its body.
func renderSubagent(x *api.Item, se *proto.SignedEnvelope) {
	s, ok := mailbox.ParseSubagent(se.Message.Body)
	if !ok {
		return // a self-addressed message meshd did not make: shown as it is
	}
	x.Kind, x.Body = api.KindSubagentResult, ""
	x.SubagentID, x.Summary = s.ID, s.Summary
	if len(s.Result) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, s.Result) == nil {
			x.Result = b.Bytes()
		}
	}
}
