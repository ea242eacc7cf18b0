package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// maxControlBody bounds a JSON request on the control socket.
const maxControlBody = 2 * proto.MaxBodySize

func (c *controlServer) registerMessagePlane() {
	c.mux.HandleFunc("GET /v1/channels", c.listChannels)
	c.mux.HandleFunc("GET /v1/channels/{name}", c.showChannel)
	c.mux.HandleFunc("POST /v1/channels", c.createChannel)
	c.mux.HandleFunc("POST /v1/subscriptions", c.subscribe)
	c.mux.HandleFunc("POST /v1/send", c.send)
	c.mux.HandleFunc("POST /v1/request", c.request)
	c.mux.HandleFunc("POST /v1/respond", c.respond)
	c.mux.HandleFunc("GET /v1/inbox", c.getInbox)
	c.mux.HandleFunc("POST /v1/inbox/{id}/read", c.markRead)
	c.mux.HandleFunc("GET /v1/events", c.events)
	c.mux.HandleFunc("GET /v1/presence", c.getPresence)
	c.mux.HandleFunc("POST /v1/presence", c.setPresence)
}

// readJSON decodes a bounded JSON body strictly.
func readJSON(w http.ResponseWriter, req *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(req.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("bad request body: %w", err), "")
		return false
	}
	return true
}

// writeRefusal maps a node error to its HTTP status.
func writeRefusal(w http.ResponseWriter, err error) {
	code, hint := http.StatusInternalServerError, ""
	switch {
	case errors.Is(err, ErrBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
		if strings.Contains(err.Error(), "channel") {
			hint = "list channels with: meshctl channel list"
		} else {
			hint = "list roster members with: meshctl roster show"
		}
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	}
	msg := err.Error()
	for _, k := range []error{ErrBadRequest, ErrNotFound, ErrForbidden} {
		msg = strings.TrimPrefix(msg, k.Error()+": ")
	}
	writeJSON(w, code, api.Error{Error: msg, Hint: hint})
}

func (c *controlServer) listChannels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Channels{Channels: c.n.ChannelList()})
}

func (c *controlServer) showChannel(w http.ResponseWriter, req *http.Request) {
	p, err := c.n.resolveChannel(req.PathValue("name"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.n.channelInfo(p))
}

func (c *controlServer) createChannel(w http.ResponseWriter, req *http.Request) {
	var in api.CreateChannel
	if !readJSON(w, req, &in) {
		return
	}
	p, err := c.n.CreateChannel(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.n.channelInfo(p))
}

func (c *controlServer) subscribe(w http.ResponseWriter, req *http.Request) {
	var in api.Subscribe
	if !readJSON(w, req, &in) {
		return
	}
	out, err := c.n.SetSubscription(in.Channel, in.State)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *controlServer) send(w http.ResponseWriter, req *http.Request) {
	var in api.Send
	if !readJSON(w, req, &in) {
		return
	}
	out, err := c.n.Send(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *controlServer) request(w http.ResponseWriter, req *http.Request) {
	var in api.Request
	if !readJSON(w, req, &in) {
		return
	}
	out, err := c.n.Request(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *controlServer) respond(w http.ResponseWriter, req *http.Request) {
	var in api.Respond
	if !readJSON(w, req, &in) {
		return
	}
	out, err := c.n.Respond(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// maxWait bounds one inbox long-poll.
const maxWait = 10 * time.Minute

func (c *controlServer) getInbox(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	all := q.Get("all") == "1" || q.Get("all") == "true"
	wait := q.Get("wait") == "1" || q.Get("wait") == "true"
	limit := 0
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number >= 0", s), "")
			return
		}
		limit = v
	}
	timeout := 30 * time.Second
	if s := q.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("timeout %q: want a duration like 30s", s), "")
			return
		}
		timeout = min(d, maxWait)
	}
	out, err := c.n.Inbox(req.Context(), all, limit, wait, timeout)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *controlServer) markRead(w http.ResponseWriter, req *http.Request) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("item id: %v", err), "")
		return
	}
	if err := c.n.store.MarkRead(id); err != nil {
		if errors.Is(err, history.ErrNotFound) {
			writeErr(w, http.StatusNotFound, fmt.Errorf("no inbox item %s", id), "list items with: meshctl inbox --all")
			return
		}
		writeRefusal(w, err)
		return
	}
	it, err := c.n.inboxItem(id)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

func (c *controlServer) getPresence(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.n.PresenceTable())
}

func (c *controlServer) setPresence(w http.ResponseWriter, req *http.Request) {
	var in api.SetPresence
	if !readJSON(w, req, &in) {
		return
	}
	st, err := proto.ParsePresenceState(in.State)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err, "")
		return
	}
	c.n.publishPresence(st)
	writeJSON(w, http.StatusOK, c.n.PresenceTable())
}
