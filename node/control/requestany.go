package control

import (
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// requestAny serves POST /v1/request/any: ask the members whose card
// lists the intent, one at a time, until one takes the request. It is
// composed of what the backend already serves (cards, requests and the
// event stream), so it holds no state of its own: a request left
// unanswered stays with its peer, and a peer that accepts it late still
// does the work; its answer reaches the inbox like any other.
func (s *Server) requestAny(w http.ResponseWriter, req *http.Request) {
	var in api.RequestAny
	if !readJSON(w, req, &in) {
		return
	}
	wait := api.DefaultAcceptTimeout
	if in.AcceptTimeoutSeconds != 0 {
		wait = time.Duration(in.AcceptTimeoutSeconds * float64(time.Second))
	}
	switch {
	case in.Intent == "" || len(in.Intent) > proto.MaxIntentLen || !utf8.ValidString(in.Intent):
		writeErr(w, http.StatusBadRequest, fmt.Errorf("intent must be 1 to %d bytes of UTF-8", proto.MaxIntentLen), "")
		return
	case wait <= 0 || wait > api.MaxAcceptTimeout:
		writeErr(w, http.StatusBadRequest, fmt.Errorf("accept_timeout_seconds must be above 0 and at most %v", api.MaxAcceptTimeout.Seconds()), "")
		return
	}
	cands := anyCandidates(s.b.CardList(in.Intent).Cards)
	if len(cands) == 0 {
		writeErr(w, http.StatusNotFound, fmt.Errorf("no online or away member's card lists intent %q", in.Intent),
			"see who serves what: meshctl agents --intent "+in.Intent)
		return
	}
	// Subscribe before the first request, so no answer slips past.
	items, _, cancel := s.b.SubscribeEvents()
	defer cancel()
	out := &api.AnyResult{Tried: []api.AnyTry{}}
	for _, c := range cands {
		sent, err := s.b.Request(api.Request{To: c.Fingerprint, Intent: in.Intent, Params: in.Params, ReplyTo: in.ReplyTo})
		if err != nil {
			writeRefusal(w, err)
			return
		}
		try := api.AnyTry{Party: c.Party, Presence: c.Presence, RequestID: sent.RequestID, Outcome: "timed_out"}
		answer, err := s.awaitAnswer(req, items, sent.RequestID, wait)
		if err != nil {
			return // the client left, or meshd stops
		}
		if answer != nil {
			try.Outcome = answer.Status
		}
		out.Tried = append(out.Tried, try)
		if answer == nil || answer.Status == "rejected" {
			continue
		}
		peer := c.Party
		out.Taken, out.Peer, out.Request, out.Answer = true, &peer, sent, answer
		break
	}
	writeJSON(w, http.StatusOK, out)
}

// errAnyGone ends a request-any whose client left or whose node stops.
var errAnyGone = errors.New("request-any: client gone or meshd stopping")

// awaitAnswer waits up to wait for the first answer to request rid. A
// lost event (the subscriber lagged) can only make a candidate look
// silent: its answer is in the inbox all the same.
func (s *Server) awaitAnswer(req *http.Request, items <-chan api.Delivered, rid string, wait time.Duration) (*api.Item, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-req.Context().Done():
			return nil, errAnyGone
		case <-s.b.Done():
			return nil, errAnyGone
		case <-t.C:
			return nil, nil
		case d := <-items:
			if it := d.Item(); it.Kind == "response" && it.RequestID == rid {
				return &it, nil
			}
		}
	}
}

// anyCandidates keeps the cards of other members that are online or
// away, in the list's order (online first), at most MaxAnyCandidates.
func anyCandidates(cards []api.Card) []api.Card {
	var out []api.Card
	for _, c := range cards {
		if !c.Self && !c.Cleared && (c.Presence == "online" || c.Presence == "away") {
			out = append(out, c)
		}
		if len(out) == api.MaxAnyCandidates {
			break
		}
	}
	return out
}
