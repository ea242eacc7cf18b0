package control

import (
	"net/http"

	"github.com/meshd/meshd/node/api"
)

// JoinBackend is the part of [Backend] that brings nodes into the org:
// invites, the nodes refused as non-members, and the doctor's checks.
type JoinBackend interface {
	CreateInvite(req api.CreateInvite) (*api.InviteCreated, error)
	InviteList() (api.Invites, error)
	RevokeInvite(id string) (*api.Invite, error)
	PendingList() api.Pending
	Doctor() api.Doctor
	AdoptState() api.Adopt
	Adopt(req api.AdoptRequest) (*api.Adopt, error)
}

func (s *Server) joinRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/invites", s.createInvite)
	mux.HandleFunc("GET /v1/invites", s.listInvites)
	mux.HandleFunc("POST /v1/invites/{id}/revoke", s.revokeInvite)
	mux.HandleFunc("GET /v1/pending", s.getPending)
	mux.HandleFunc("GET /v1/doctor", s.getDoctor)
	mux.HandleFunc("GET /v1/adopt", s.getAdopt)
	mux.HandleFunc("POST /v1/adopt", s.postAdopt)
}

func (s *Server) getAdopt(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.AdoptState())
}

func (s *Server) postAdopt(w http.ResponseWriter, req *http.Request) {
	var in api.AdoptRequest
	if !readJSON(w, req, &in) {
		return
	}
	out, err := s.b.Adopt(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getDoctor(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.Doctor())
}

func (s *Server) createInvite(w http.ResponseWriter, req *http.Request) {
	var in api.CreateInvite
	if !readJSON(w, req, &in) {
		return
	}
	out, err := s.b.CreateInvite(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	// The answer holds the token: it must not be cached anywhere.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listInvites(w http.ResponseWriter, _ *http.Request) {
	out, err := s.b.InviteList()
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeInvite(w http.ResponseWriter, req *http.Request) {
	out, err := s.b.RevokeInvite(req.PathValue("id"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getPending(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.b.PendingList())
}
