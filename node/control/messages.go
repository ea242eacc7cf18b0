package control

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
)

func (s *Server) listChannels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Channels{Channels: s.b.ChannelList()})
}

func (s *Server) showChannel(w http.ResponseWriter, req *http.Request) {
	c, err := s.b.Channel(req.PathValue("name"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) createChannel(w http.ResponseWriter, req *http.Request) {
	var in api.CreateChannel
	if !readJSON(w, req, &in) {
		return
	}
	c, err := s.b.NewChannel(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) updateChannel(w http.ResponseWriter, req *http.Request) {
	var in api.UpdateChannel
	if !readJSON(w, req, &in) {
		return
	}
	c, err := s.b.UpdateChannel(req.PathValue("name"), in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) draftChannel(w http.ResponseWriter, req *http.Request) {
	var in api.DraftChannel
	if !readJSON(w, req, &in) {
		return
	}
	d, err := s.b.DraftChannel(req.PathValue("name"), in.UpdateChannel, in.Delete)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) publishChannel(w http.ResponseWriter, req *http.Request) {
	var in api.PublishChannel
	if !readJSON(w, req, &in) {
		return
	}
	c, err := s.b.PublishChannel(in.Document)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) deleteChannel(w http.ResponseWriter, req *http.Request) {
	c, err := s.b.DeleteChannel(req.PathValue("name"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) listBlocks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.Blocks())
}

func (s *Server) block(w http.ResponseWriter, req *http.Request) {
	var in api.SetBlock
	if !readJSON(w, req, &in) {
		return
	}
	if in.Member == "" {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("member is required"), "list members with: meshctl roster show")
		return
	}
	b, err := s.b.SetBlock(in.Member, true)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) unblock(w http.ResponseWriter, req *http.Request) {
	b, err := s.b.SetBlock(req.PathValue("member"), false)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) subscribe(w http.ResponseWriter, req *http.Request) {
	var in api.Subscribe
	if !readJSON(w, req, &in) {
		return
	}
	out, err := s.b.SetSubscription(in.Channel, in.State)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// jsonCall serves an endpoint that takes one JSON body and answers with
// what call returns.
func jsonCall[In, Out any](w http.ResponseWriter, req *http.Request, call func(In) (Out, error)) {
	var in In
	if !readJSON(w, req, &in) {
		return
	}
	out, err := call(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) send(w http.ResponseWriter, req *http.Request)    { jsonCall(w, req, s.b.Send) }
func (s *Server) request(w http.ResponseWriter, req *http.Request) { jsonCall(w, req, s.b.Request) }
func (s *Server) respond(w http.ResponseWriter, req *http.Request) { jsonCall(w, req, s.b.Respond) }

// fetchWait bounds one POST /v1/fetch; the fetch goes on after it.
const fetchWait = 10 * time.Minute

func (s *Server) fetch(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), fetchWait)
	defer cancel()
	jsonCall(w, req, func(in api.Fetch) (*api.Fetched, error) { return s.b.Fetch(ctx, in) })
}

func (s *Server) getSent(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	in := api.SentQuery{Pending: q.Get("pending") == "1" || q.Get("pending") == "true"}
	if v := q.Get("limit"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number >= 0", v), "")
			return
		}
		in.Limit = k
	}
	out, err := s.b.Sent(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getDelivery(w http.ResponseWriter, req *http.Request) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("message id: %v", err), "the id meshctl send, request or respond printed")
		return
	}
	out, err := s.b.DeliveryStatus(id)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// maxWait bounds one inbox long-poll.
const maxWait = 10 * time.Minute

func (s *Server) getInbox(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	all := q.Get("all") == "1" || q.Get("all") == "true"
	wait := q.Get("wait") == "1" || q.Get("wait") == "true"
	limit := 0
	if v := q.Get("limit"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number >= 0", v), "")
			return
		}
		limit = k
	}
	timeout := 30 * time.Second
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("timeout %q: want a duration like 30s", v), "")
			return
		}
		timeout = min(d, maxWait)
	}
	out, err := s.b.InboxPage(req.Context(), api.InboxQuery{All: all, Wait: wait, Timeout: timeout, Limit: limit, Cursor: q.Get("cursor"), Filter: inboxFilter(q)})
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) markRead(w http.ResponseWriter, req *http.Request) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("item id: %v", err), "")
		return
	}
	it, err := s.b.MarkRead(id, req.URL.Query().Get("from"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

func (s *Server) getPresence(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.PresenceTable())
}

func (s *Server) setPresence(w http.ResponseWriter, req *http.Request) {
	jsonCall(w, req, s.b.SetPresence)
}

func (s *Server) postSubagentResult(w http.ResponseWriter, req *http.Request) {
	jsonCall(w, req, s.b.PostSubagentResult)
}

func (s *Server) getHistory(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	name := q.Get("channel")
	if name == "" {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("channel is required"), "list channels with: meshctl channel list")
		return
	}
	since, err := api.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		writeErr(w, http.StatusBadRequest, err, "")
		return
	}
	limit := api.DefaultHistoryLimit
	if v := q.Get("limit"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 || k > api.MaxHistoryLimit {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number from 1 to %d", v, api.MaxHistoryLimit), "")
			return
		}
		if k > 0 {
			limit = k
		}
	}
	out, err := s.b.History(name, since, limit)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSequence(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.Sequence())
}
