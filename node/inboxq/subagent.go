package inboxq

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
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
func (q *Queries) PostSubagentResult(req api.SubagentResult) (api.Item, error) {
	q.host.Acted()
	if err := checkSubagentResult(req); err != nil {
		q.host.Count(SubagentRefused)
		return api.Item{}, err
	}
	body, err := mailbox.SubagentBody(mailbox.Subagent{ID: req.SubagentID, Summary: req.Summary, Result: req.Result})
	if err != nil {
		return api.Item{}, apierr.BadRequest("result: %v", err)
	}
	if len(body) > proto.MaxBodySize {
		return api.Item{}, apierr.New(http.StatusBadRequest, "put the result in a file and give its path in the result",
			"subagent result of %d bytes exceeds the message limit of 256 KiB (%d bytes)", len(body), proto.MaxBodySize)
	}
	se, err := q.host.Sign(proto.ToPeer(q.cfg.Self), proto.KindMessage, q.cfg.OfflineWindow, func(e *proto.Envelope) {
		e.Message = &proto.Message{Body: body}
	})
	if err != nil {
		return api.Item{}, err
	}
	out, err := q.store.Deliver([]history.Delivery{{Env: se, Inbox: true, Priority: history.PriorityHigh, Wakes: true}})
	if err != nil {
		return api.Item{}, err
	}
	if out[0] != history.Added {
		return api.Item{}, apierr.New(http.StatusInsufficientStorage, "read and let retention remove older items, or raise sender_store_mib",
			"this node's store holds as much of its own as it may: the result was not kept")
	}
	now := time.Now()
	q.host.Count(InboxItems)
	q.host.Count(SubagentPosted)
	q.host.Delivered(se, history.PriorityHigh, true, now)
	x := q.RenderEnvelope(se, history.InboxItem{Meta: history.Meta{ID: se.ID}, Priority: history.PriorityHigh, Wakes: true, Delivered: now})
	q.Notify(true)
	return x, nil
}

func checkSubagentResult(req api.SubagentResult) error {
	switch {
	case req.SubagentID == "" || len(req.SubagentID) > MaxSubagentID:
		return apierr.BadRequest("subagent id of %d bytes: want 1 to %d", len(req.SubagentID), MaxSubagentID)
	case !utf8.ValidString(req.SubagentID) || !printableLine(req.SubagentID):
		return apierr.BadRequest("subagent id %q: want text on one line, without control characters", req.SubagentID)
	case req.Summary == "" || len(req.Summary) > MaxSubagentSummary:
		return apierr.New(http.StatusBadRequest, "keep the summary short; put detail in the result",
			"summary of %d bytes: want 1 to %d", len(req.Summary), MaxSubagentSummary)
	case !utf8.ValidString(req.Summary):
		return apierr.BadRequest("summary is not valid UTF-8")
	case len(bytes.TrimSpace(req.Result)) > 0 && !json.Valid(req.Result):
		return apierr.BadRequest("result is not valid JSON")
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
