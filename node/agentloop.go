package node

import (
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
	cReplyRefused = newEvent("reply.refused")
	cReplySent    = newEvent("reply.sent")
	cSearchRuns   = newEvent("search.runs")
)

// Replies, search, the requests this node sent and conversations with one
// peer: what an agent loop needs beyond listing its inbox.

// defaultListLimit is the rows of a search, request list or conversation
// when no limit is given.
const defaultListLimit = 100

// Reply sends a message in answer to inbox item in.ID: to its channel
// (or, with in.Direct, as a DM to its sender), or as a DM to the sender
// of a DM, request or response, with in_reply_to set to the item.
func (n *Node) Reply(in api.Reply) (*api.Sent, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, badRequest("item id: %v", err)
	}
	it, err := n.inboxItem(id, in.From)
	if err != nil {
		return nil, err
	}
	if it.From.Equal(n.id.Pub) {
		n.metrics.inc(cReplyRefused)
		return nil, badRequest("item %s is a delivery_failed item: this node's own %s, which did not reach its peer; send again with meshctl dm or meshctl request", id, it.Kind)
	}
	req := api.Send{To: it.From.String(), Body: in.Body, InReplyTo: id.String()}
	if it.To.Kind == proto.DestChannel && !in.Direct {
		p, ok := n.channels.ByID(it.To.Channel)
		if !ok {
			return nil, notFound(hintChannels, "channel %s of item %s is not known here", it.To.Channel, id)
		}
		req.To = "#" + p.Name
	}
	out, err := n.out.Send(req)
	if err != nil {
		return nil, err
	}
	n.metrics.inc(cReplySent)
	return out, nil
}

// Search lists the held inbox items (read ones too) that pass f and whose
// text holds text, case-insensitively: the body, a request's intent and
// params, a response's status and result, and the sender's name. It
// returns the newest limit matches (100 if 0), oldest first. It reads
// the whole inbox, a page at a time.
func (n *Node) Search(text string, limit int, f api.InboxFilter) (*api.Inbox, error) {
	if strings.TrimSpace(text) == "" {
		return nil, badRequest("the text to search for is empty")
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	match, since, err := n.inboxMatch(f)
	if err != nil {
		return nil, err
	}
	needle := strings.ToLower(text)
	var hits []api.Item
	sq := history.InboxPageQuery{FromStart: true, Limit: maxInboxAnswer, MaxBytes: maxInboxBytes, Since: since, Match: match}
	for {
		p, err := n.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			x, err := n.renderItem(it)
			if err != nil {
				continue
			}
			if strings.Contains(strings.ToLower(searchText(&x)), needle) {
				hits = append(hits, x)
				if len(hits) > limit {
					hits = hits[1:]
				}
			}
		}
		if p.Next == nil {
			break
		}
		sq.After, sq.FromStart = p.Next, false
	}
	n.metrics.inc(cSearchRuns)
	if hits == nil {
		hits = []api.Item{}
	}
	return &api.Inbox{Items: hits}, nil
}

// searchText is what Search looks in.
func searchText(x *api.Item) string {
	var b strings.Builder
	for _, s := range []string{x.Body, x.Intent, string(x.Params), x.Status, string(x.Result), x.From.Name, x.To, x.Reason} {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// SentRequests lists the requests this node sent, newest first, each with
// its latest status: that of the newest response from the peer asked,
// or its delivery state while none came. With pending, only those still
// waiting for a final answer.
func (n *Node) SentRequests(pending bool, limit int) (*api.SentRequests, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	rs, err := n.store.Deliveries(history.DeliveryFilter{Limit: maxDeliveryRecords})
	if err != nil {
		return nil, err
	}
	var reqs []history.DeliveryRecord
	oldest := time.Now()
	for _, r := range rs {
		if r.Kind == proto.KindRequest && !r.IsChannel {
			reqs = append(reqs, r)
			if r.Sent.Before(oldest) {
				oldest = r.Sent
			}
		}
	}
	answers, err := n.responsesSince(oldest.Add(-time.Minute))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := &api.SentRequests{Requests: []api.SentRequest{}}
	for _, r := range reqs {
		x := api.SentRequest{ID: r.ID.String(), To: n.party(r.Peer), Sent: r.Sent.UTC(),
			AgeSeconds: now.Sub(r.Sent).Seconds(), Delivery: r.State.String(), Status: r.State.String()}
		var rid uuid.UUID
		if st, err := n.store.Get(n.id.Pub, r.ID); err == nil {
			if se, err := st.Envelope(); err == nil && se.Request != nil {
				rid = se.Request.RequestID
				x.RequestID, x.Intent = rid.String(), se.Request.Intent
			}
		}
		final := r.State.Failed()
		if a, ok := answers[respKey{r.Peer, rid}]; ok && rid != uuid.Nil {
			x.Status, x.Answered, x.Responses = a.status.String(), a.at.UTC(), a.count
			if res := jsonOf(a.result); res != nil {
				x.Result = res
			}
			final = final || a.status.Final()
		}
		x.Pending = !final
		if pending && !x.Pending {
			continue
		}
		out.Requests = append(out.Requests, x)
		if len(out.Requests) == limit {
			break
		}
	}
	return out, nil
}

type respKey struct {
	peer proto.PubKey
	rid  uuid.UUID
}

type latestResponse struct {
	status proto.Status
	at     time.Time
	result []byte
	count  int
}

// responsesSince returns, per (responder, request id), the newest
// response delivered since since and how many came.
func (n *Node) responsesSince(since time.Time) (map[respKey]latestResponse, error) {
	out := map[respKey]latestResponse{}
	self := n.id.Pub
	sq := history.InboxPageQuery{FromStart: true, Limit: maxInboxAnswer, MaxBytes: maxInboxBytes, Since: since,
		Match: func(m *history.Meta) bool { return m.Kind == proto.KindResponse && !m.From.Equal(self) }}
	for {
		p, err := n.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			st, err := n.store.Get(it.From, it.ID)
			if err != nil {
				continue
			}
			se, err := st.Envelope()
			if err != nil || se.Response == nil {
				continue
			}
			k := respKey{se.From, se.Response.RequestID}
			a := out[k]
			a.count++
			if !it.Delivered.Before(a.at) {
				a.status, a.at, a.result = se.Response.Status, it.Delivered, se.Response.Result
			}
			out[k] = a
		}
		if p.Next == nil {
			return out, nil
		}
		sq.After, sq.FromStart = p.Next, false
	}
}

// Conversation lists the DMs, requests and responses between this node
// and peer, both ways, sent at or after since: the newest limit (100 if
// 0), oldest first. What the peer sent carries its inbox state; what
// this node sent is marked Out, with its delivery state.
func (n *Node) Conversation(peer string, since time.Time, limit int) (*api.Conversation, error) {
	m, err := n.resolvePeer(peer)
	if err != nil {
		return nil, err
	}
	if m.Key.Equal(n.id.Pub) {
		return nil, refuse(http.StatusBadRequest, "name another member", "a conversation is with another member, not this node")
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	self, other := n.id.Pub, m.Key
	sts, err := n.store.Direct(since, limit, func(x *history.Meta) bool {
		if x.To.Kind != proto.DestPeer {
			return false
		}
		return (x.From.Equal(other) && x.To.Peer.Equal(self)) || (x.From.Equal(self) && x.To.Peer.Equal(other))
	})
	if err != nil {
		return nil, err
	}
	out := &api.Conversation{Peer: n.party(other), Entries: make([]api.ConversationEntry, 0, len(sts))}
	for i := len(sts) - 1; i >= 0; i-- {
		st := sts[i]
		se, err := proto.ParseEnvelope(st.Raw)
		if err != nil {
			continue
		}
		e := api.ConversationEntry{Out: st.From.Equal(self)}
		if e.Out {
			e.Item = n.renderEnvelope(se, history.InboxItem{Meta: st.Meta, Delivered: st.Received})
			e.Item.Read, e.Item.Priority = true, ""
			if rs, err := n.store.DeliveriesOf(se.ID); err == nil {
				for _, r := range rs {
					if r.Peer.Equal(other) {
						e.Item.Delivery = r.State.String()
						e.Item.Reason = r.Reason
					}
				}
			}
		} else if it, err := n.store.InboxEntry(st.From, st.ID); err == nil {
			e.Item = n.renderEnvelope(se, it)
			e.Item.Claim = n.claims.Of(claims.Key{From: it.From, ID: it.ID}, time.Now())
		} else {
			e.Item = n.renderEnvelope(se, history.InboxItem{Meta: st.Meta, Delivered: st.Received})
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}
