package inboxq

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// Replies, search, the requests this node sent and conversations with one
// peer: what an agent loop needs beyond listing its inbox.

// defaultListLimit is the rows of a search, request list or conversation
// when no limit is given.
const defaultListLimit = 100

// Reply sends a message in answer to inbox item in.ID: to its channel
// (or, with in.Direct, as a DM to its sender), or as a DM to the sender
// of a DM, request or response, with in_reply_to set to the item.
func (q *Queries) Reply(in api.Reply) (*api.Sent, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, apierr.BadRequest("item id: %v", err)
	}
	it, err := q.Item(id, in.From)
	if err != nil {
		return nil, err
	}
	if it.From.Equal(q.cfg.Self) {
		q.host.Count(ReplyRefused)
		return nil, apierr.BadRequest("item %s is a delivery_failed item: this node's own %s, which did not reach its peer; send again with meshctl dm or meshctl request", id, it.Kind)
	}
	req := api.Send{To: it.From.String(), Body: in.Body, InReplyTo: id.String()}
	if it.To.Kind == proto.DestChannel && !in.Direct {
		p, ok := q.host.Channel(it.To.Channel)
		if !ok {
			return nil, apierr.NotFound("list channels with: meshctl channel list", "channel %s of item %s is not known here", it.To.Channel, id)
		}
		req.To = "#" + p.Name
	}
	out, err := q.host.Send(req)
	if err != nil {
		return nil, err
	}
	q.host.Count(ReplySent)
	return out, nil
}

// Search lists the held inbox items (read ones too) that pass f and whose
// text holds text, case-insensitively: the body, a request's intent and
// params, a response's status and result, and the sender's name. It
// returns the newest limit matches (100 if 0), oldest first. It reads
// the whole inbox, a page at a time.
func (q *Queries) Search(text string, limit int, f api.InboxFilter) (*api.Inbox, error) {
	if strings.TrimSpace(text) == "" {
		return nil, apierr.BadRequest("the text to search for is empty")
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	match, since, err := q.Match(f)
	if err != nil {
		return nil, err
	}
	needle := strings.ToLower(text)
	var hits []api.Item
	sq := history.InboxPageQuery{FromStart: true, Limit: MaxAnswer, MaxBytes: MaxBytes, Since: since, Match: match}
	for {
		p, err := q.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			x, err := q.Render(it)
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
	q.host.Count(SearchRuns)
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
func (q *Queries) SentRequests(pending bool, limit int) (*api.SentRequests, error) {
	if limit <= 0 {
		limit = defaultListLimit
	}
	rs, err := q.store.Deliveries(history.DeliveryFilter{Limit: q.cfg.MaxDeliveryRecords})
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
	answers, err := q.responsesSince(oldest.Add(-time.Minute))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := &api.SentRequests{Requests: []api.SentRequest{}}
	for _, r := range reqs {
		x := api.SentRequest{ID: r.ID.String(), To: q.host.Party(r.Peer), Sent: r.Sent.UTC(),
			AgeSeconds: now.Sub(r.Sent).Seconds(), Delivery: r.State.String(), Status: r.State.String()}
		var rid uuid.UUID
		if st, err := q.store.Get(q.cfg.Self, r.ID); err == nil {
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
func (q *Queries) responsesSince(since time.Time) (map[respKey]latestResponse, error) {
	out := map[respKey]latestResponse{}
	self := q.cfg.Self
	sq := history.InboxPageQuery{FromStart: true, Limit: MaxAnswer, MaxBytes: MaxBytes, Since: since,
		Match: func(m *history.Meta) bool { return m.Kind == proto.KindResponse && !m.From.Equal(self) }}
	for {
		p, err := q.store.InboxPage(sq)
		if err != nil {
			return nil, err
		}
		for _, it := range p.Items {
			st, err := q.store.Get(it.From, it.ID)
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
func (q *Queries) Conversation(peer string, since time.Time, limit int) (*api.Conversation, error) {
	m, err := q.host.ResolvePeer(peer)
	if err != nil {
		return nil, err
	}
	if m.Key.Equal(q.cfg.Self) {
		return nil, apierr.New(http.StatusBadRequest, "name another member", "a conversation is with another member, not this node")
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	self, other := q.cfg.Self, m.Key
	sts, err := q.store.Direct(since, limit, func(x *history.Meta) bool {
		if x.To.Kind != proto.DestPeer {
			return false
		}
		return (x.From.Equal(other) && x.To.Peer.Equal(self)) || (x.From.Equal(self) && x.To.Peer.Equal(other))
	})
	if err != nil {
		return nil, err
	}
	out := &api.Conversation{Peer: q.host.Party(other), Entries: make([]api.ConversationEntry, 0, len(sts))}
	for i := len(sts) - 1; i >= 0; i-- {
		st := sts[i]
		se, err := proto.ParseEnvelope(st.Raw)
		if err != nil {
			continue
		}
		e := api.ConversationEntry{Out: st.From.Equal(self)}
		if e.Out {
			e.Item = q.RenderEnvelope(se, history.InboxItem{Meta: st.Meta, Delivered: st.Received})
			e.Item.Read, e.Item.Priority = true, ""
			if rs, err := q.store.DeliveriesOf(se.ID); err == nil {
				for _, r := range rs {
					if r.Peer.Equal(other) {
						e.Item.Delivery = r.State.String()
						e.Item.Reason = r.Reason
					}
				}
			}
		} else if it, err := q.store.InboxEntry(st.From, st.ID); err == nil {
			e.Item = q.RenderEnvelope(se, it)
			e.Item.Claim = q.claimOf(it.From, it.ID)
		} else {
			e.Item = q.RenderEnvelope(se, history.InboxItem{Meta: st.Meta, Delivered: st.Received})
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}
