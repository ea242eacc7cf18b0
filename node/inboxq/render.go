package inboxq

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

func (q *Queries) renderItems(items []history.InboxItem) *api.Inbox {
	out := &api.Inbox{Items: []api.Item{}}
	for _, it := range items {
		x, err := q.Render(it)
		if err != nil {
			q.log.Warn("inbox item unreadable", "id", it.ID, "err", err)
			continue
		}
		out.Items = append(out.Items, x)
	}
	return out
}

// Render renders a stored inbox item, reading its envelope: with the
// failure of this node's own envelope and a worker's live claim.
func (q *Queries) Render(it history.InboxItem) (api.Item, error) {
	st, err := q.store.Get(it.From, it.ID)
	if err != nil {
		return api.Item{}, err
	}
	se, err := st.Envelope()
	if err != nil {
		return api.Item{}, err
	}
	x := q.RenderEnvelope(se, it)
	q.host.MarkFailed(&x, se)
	x.Claim = q.claimOf(it.From, it.ID)
	return x, nil
}

// RenderEnvelope renders an inbox item whose envelope is at hand.
func (q *Queries) RenderEnvelope(se *proto.SignedEnvelope, it history.InboxItem) api.Item {
	x := api.Item{
		ID:          se.ID.String(),
		Kind:        se.Kind.String(),
		From:        q.host.Party(se.From),
		To:          q.host.DestText(se.To),
		Priority:    it.Priority.String(),
		Wakes:       it.Wakes,
		Read:        it.Read,
		Sent:        se.Time().UTC(),
		Delivered:   it.Delivered.UTC(),
		Expires:     se.Expires().UTC(),
		Expired:     se.Expires().Before(time.Now()),
		FromHistory: it.FromHistory,
		Seq:         se.Seq,
	}
	if se.To.Kind == proto.DestChannel {
		x.Channel = x.To[1:]
	}
	switch {
	case se.Message != nil:
		x.Body = se.Message.Body
		if se.Message.InReplyTo != nil {
			x.InReplyTo = se.Message.InReplyTo.String()
		}
		if IsLocal(se, q.cfg.Self) {
			renderSubagent(&x, se)
		}
	case se.Request != nil:
		x.RequestID = se.Request.RequestID.String()
		x.Intent = se.Request.Intent
		x.Params = jsonOf(se.Request.Params)
		if se.Request.ReplyTo != nil {
			x.ReplyTo = se.Request.ReplyTo.String()
		}
		hop := int(se.Request.Hop)
		x.Hop = &hop
	case se.Response != nil:
		x.RequestID = se.Response.RequestID.String()
		x.Status = se.Response.Status.String()
		x.Result = jsonOf(se.Response.Result)
	}
	x.Attachments = q.host.Attachments(se, it.Delivered)
	return x
}

// IsLocal reports whether se is an item self signed to itself (a
// subagent result).
func IsLocal(se *proto.SignedEnvelope, self proto.PubKey) bool {
	return mailbox.IsLocal(&se.Envelope) && se.From.Equal(self)
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

// jsonOf renders a JSON-model CBOR payload for the API.
func jsonOf(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	b, err := proto.CBORToJSON(raw)
	if err != nil {
		return nil
	}
	return b
}

// label is "name (fingerprint)", or the fingerprint alone.
func (q *Queries) label(k proto.PubKey) string {
	if m, ok := q.host.Roster().Known(k); ok && m.Name != "" {
		return m.Name + " (" + k.Fingerprint() + ")"
	}
	return k.Fingerprint()
}
