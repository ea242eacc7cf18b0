package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	cReadRefusedAmbiguous = newEvent("read.refused.ambiguous")
)

// Inbox lists inbox items (unread only unless all): the first page of
// the newest limit (1000 if 0). With wait it blocks, up to timeout or
// until ctx ends, until an unread waking item exists.
func (n *Node) Inbox(ctx context.Context, all bool, limit int, wait bool, timeout time.Duration) (*api.Inbox, error) {
	return n.InboxPage(ctx, api.InboxQuery{All: all, Limit: limit, Wait: wait, Timeout: timeout})
}

func (n *Node) renderItems(items []history.InboxItem) *api.Inbox {
	out := &api.Inbox{Items: []api.Item{}}
	for _, it := range items {
		x, err := n.renderItem(it)
		if err != nil {
			n.log.Warn("inbox item unreadable", "id", it.ID, "err", err)
			continue
		}
		out.Items = append(out.Items, x)
	}
	return out
}

// party names a key for the API, with its roster name and role, and
// whether that name needs the fingerprint beside it.
func (n *Node) party(k proto.PubKey) api.Party {
	p := api.Party{Key: k, Fingerprint: k.Fingerprint()}
	r := n.Roster()
	if m, ok := r.Known(k); ok { // a previous key keeps its member's name
		p.Name, p.Role = m.Name, m.Role.String()
		p.NameAmbiguous = m.Name != "" && !n.names.of(r).Unique(m.Name)
	}
	return p
}

// destText renders a destination: "#name" or "@name".
func (n *Node) destText(d proto.Destination) string {
	switch d.Kind {
	case proto.DestChannel:
		if p, ok := n.channels.ByID(d.Channel); ok {
			return "#" + p.Name
		}
		return "#" + d.Channel.String()
	case proto.DestPeer:
		if m, ok := n.Roster().Known(d.Peer); ok && m.Name != "" {
			return "@" + m.Name
		}
		return "@" + d.Peer.Fingerprint()
	}
	return d.String()
}

// renderItem renders a stored inbox item, reading its envelope.
func (n *Node) renderItem(it history.InboxItem) (api.Item, error) {
	st, err := n.store.Get(it.From, it.ID)
	if err != nil {
		return api.Item{}, err
	}
	se, err := st.Envelope()
	if err != nil {
		return api.Item{}, err
	}
	x := n.renderEnvelope(se, it)
	n.out.MarkFailed(&x, se)
	x.Claim = n.claims.Of(claims.Key{From: it.From, ID: it.ID}, time.Now())
	return x, nil
}

// renderEnvelope renders an inbox item whose envelope is at hand.
func (n *Node) renderEnvelope(se *proto.SignedEnvelope, it history.InboxItem) api.Item {
	x := api.Item{
		ID:          se.ID.String(),
		Kind:        se.Kind.String(),
		From:        n.party(se.From),
		To:          n.destText(se.To),
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
		if n.isLocalItem(se) {
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
	x.Attachments = n.renderAttachments(se, it.Delivered)
	return x
}

// MarkRead marks inbox item id read and returns it. Envelopes are
// (sender, id): should two senders' items share the id, the caller must
// name the sender (from: a name, fingerprint or key), and an id without
// one is refused, naming the candidates by sender; a reused id must not
// let one sender mark another's item read.
func (n *Node) MarkRead(id uuid.UUID, from string) (api.Item, error) {
	n.own.Acted()
	item, err := n.inboxItemHint(id, from, "name the sender: meshctl read "+id.String()+" --from PEER")
	if err != nil {
		return api.Item{}, err
	}
	items := []history.InboxItem{item}
	if err := n.store.MarkRead(items[0].From, id); err != nil && !errors.Is(err, history.ErrNotFound) {
		return api.Item{}, err
	}
	n.claims.ReleaseRead(claims.Key{From: items[0].From, ID: id})
	n.onRead(envKey{items[0].From, id})
	it, err := n.store.InboxEntry(items[0].From, id)
	if err != nil {
		return api.Item{}, err
	}
	return n.renderItem(it)
}

// inboxItem finds inbox item id, of sender from when several share it;
// hint is the fix an ambiguous id gets.
func (n *Node) inboxItem(id uuid.UUID, from string) (history.InboxItem, error) {
	return n.inboxItemHint(id, from, "name the sender with --from PEER")
}

func (n *Node) inboxItemHint(id uuid.UUID, from, hint string) (history.InboxItem, error) {
	items, err := n.store.InboxByID(id)
	if err != nil {
		return history.InboxItem{}, err
	}
	if len(items) == 0 {
		return history.InboxItem{}, notFound("list items with: meshctl inbox --all", "no inbox item %s", id)
	}
	if strings.TrimPrefix(strings.TrimSpace(from), "@") != "" {
		m, err := n.resolvePeer(from)
		if err != nil {
			return history.InboxItem{}, err
		}
		kept := items[:0]
		for _, it := range items {
			if it.From.Equal(m.Key) {
				kept = append(kept, it)
			}
		}
		if len(kept) == 0 {
			return history.InboxItem{}, notFound("list items with: meshctl inbox --all", "no inbox item %s from %s", id, label(m))
		}
		items = kept
	}
	if len(items) > 1 {
		var s []string
		for _, it := range items {
			s = append(s, n.memberLabel(it.From))
		}
		n.metrics.inc(cReadRefusedAmbiguous)
		return history.InboxItem{}, refuse(http.StatusConflict, hint,
			"inbox item id %s is ambiguous: %d senders' items share it: %s", id, len(items), strings.Join(s, ", "))
	}
	return items[0], nil
}

// ClaimNext claims up to q.Count unread items that pass q's filter and no
