package control

import (
	"net/http"

	"github.com/meshd/meshd/node/api"
)

// CardBackend is the part of [Backend] that serves agent cards: this
// node's own, and the members' it holds.
type CardBackend interface {
	// CardList lists the members' cards; with intent set, only the
	// cards that list it.
	CardList(intent string) api.Cards
	// CardOf returns one member's card; "" is this node.
	CardOf(peer string) (api.Card, error)
	SetCard(in api.CardInput) (api.Card, error)
	ClearCard() (api.Card, error)
	// Cancel asks the peer working on one of this node's requests to
	// stop (a Request for proto.IntentCancel).
	Cancel(req api.Cancel) (*api.Sent, error)
}

func (s *Server) cardRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/cards", s.listCards)
	mux.HandleFunc("GET /v1/cards/{peer}", s.showCard)
	mux.HandleFunc("GET /v1/card", s.showCard)
	mux.HandleFunc("PUT /v1/card", s.setCard)
	mux.HandleFunc("DELETE /v1/card", s.clearCard)
	mux.HandleFunc("POST /v1/cancel", s.cancel)
	mux.HandleFunc("POST /v1/request/any", s.requestAny)
}

func (s *Server) cancel(w http.ResponseWriter, req *http.Request) {
	var in api.Cancel
	if !readJSON(w, req, &in) {
		return
	}
	out, err := s.b.Cancel(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listCards(w http.ResponseWriter, req *http.Request) {
	writeJSON(w, http.StatusOK, s.b.CardList(req.URL.Query().Get("intent")))
}

func (s *Server) showCard(w http.ResponseWriter, req *http.Request) {
	out, err := s.b.CardOf(req.PathValue("peer"))
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) setCard(w http.ResponseWriter, req *http.Request) {
	var in api.CardInput
	if !readJSON(w, req, &in) {
		return
	}
	out, err := s.b.SetCard(in)
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) clearCard(w http.ResponseWriter, _ *http.Request) {
	out, err := s.b.ClearCard()
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
