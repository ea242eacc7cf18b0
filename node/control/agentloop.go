package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
)

// AgentBackend is the part of [Backend] that serves the agent loop beyond
// the inbox: claims for worker pools, replies, search, the requests this
// node sent, and conversations with one peer.
type AgentBackend interface {
	// ClaimItem claims, renews or releases inbox item id for a worker.
	ClaimItem(id uuid.UUID, from string, in api.Claim) (api.Item, error)
	// ClaimNext claims up to q.Count unread items no worker holds.
	ClaimNext(ctx context.Context, q api.ClaimNext) (*api.Inbox, error)
	Reply(in api.Reply) (*api.Sent, error)
	Search(text string, limit int, f api.InboxFilter) (*api.Inbox, error)
	SentRequests(pending bool, limit int) (*api.SentRequests, error)
	Conversation(peer string, since time.Time, limit int) (*api.Conversation, error)
}

func (s *Server) agentRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/inbox/{id}/claim", s.claimItem)
	mux.HandleFunc("POST /v1/inbox/claim", s.claimNext)
	mux.HandleFunc("POST /v1/reply", func(w http.ResponseWriter, req *http.Request) { jsonCall(w, req, s.b.Reply) })
	mux.HandleFunc("GET /v1/search", s.search)
	mux.HandleFunc("GET /v1/requests", s.sentRequests)
	mux.HandleFunc("GET /v1/conversation", s.conversation)
}

// inboxFilter reads the filter parameters of an inbox query.
func inboxFilter(q url.Values) api.InboxFilter {
	return api.InboxFilter{From: q.Get("from"), Kind: q.Get("kind"), Channel: q.Get("channel"), Since: q.Get("since")}
}

// limitParam reads limit (0 when absent), or answers 400.
func limitParam(w http.ResponseWriter, q url.Values, max int) (int, bool) {
	v := q.Get("limit")
	if v == "" {
		return 0, true
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 || k > max {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("limit %q: want a number from 0 to %d", v, max), "")
		return 0, false
	}
	return k, true
}

func (s *Server) claimItem(w http.ResponseWriter, req *http.Request) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("item id: %v", err), "")
		return
	}
	jsonCall(w, req, func(in api.Claim) (api.Item, error) { return s.b.ClaimItem(id, req.URL.Query().Get("from"), in) })
}

func (s *Server) claimNext(w http.ResponseWriter, req *http.Request) {
	jsonCall(w, req, func(in api.ClaimNext) (*api.Inbox, error) { return s.b.ClaimNext(req.Context(), in) })
}

func (s *Server) search(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	limit, ok := limitParam(w, q, api.MaxHistoryLimit)
	if !ok {
		return
	}
	if q.Get("q") == "" {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("q (the text to search for) is required"), "")
		return
	}
	out, err := s.b.Search(q.Get("q"), limit, inboxFilter(q))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) sentRequests(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	limit, ok := limitParam(w, q, api.MaxHistoryLimit)
	if !ok {
		return
	}
	out, err := s.b.SentRequests(q.Get("pending") == "1" || q.Get("pending") == "true", limit)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) conversation(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	limit, ok := limitParam(w, q, api.MaxHistoryLimit)
	if !ok {
		return
	}
	if q.Get("peer") == "" {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("peer is required"), "list members with: meshctl roster show")
		return
	}
	since, err := api.ParseSince(q.Get("since"), time.Now())
	if err != nil {
		writeErr(w, http.StatusBadRequest, err, "")
		return
	}
	out, err := s.b.Conversation(q.Get("peer"), since, limit)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
