package outbound

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Request sends a Request. Only operators and admins may; a follow-up
// (ReplyTo set) carries the parent's hop + 1, and hop > 3 is refused here
// as at every receiver.
func (s *Sender) Request(req api.Request) (*api.Sent, error) {
	s.host.Acted()
	if err := s.host.MemberToSend(); err != nil {
		return nil, err
	}
	if role := s.myRole(); !role.AtLeast(roster.RoleOperator) {
		return nil, apierr.Forbidden("role too low: %ss may not send requests (operator or admin needed)", role)
	}
	r := &proto.Request{RequestID: proto.NewID(), Intent: req.Intent}
	var err error
	if r.Attachments, err = s.host.AttachFiles(req.Attachments); err != nil {
		return nil, err
	}
	if len(req.Params) > 0 {
		raw, err := proto.JSONToCBOR(req.Params)
		if err != nil {
			return nil, apierr.BadRequest("params: %w", err)
		}
		r.Params = raw
	}
	if req.ReplyTo != "" {
		parent, err := uuid.Parse(req.ReplyTo)
		if err != nil {
			return nil, apierr.BadRequest("reply_to: %v", err)
		}
		info, ok, err := s.receivedRequest(parent)
		if err != nil {
			return nil, fmt.Errorf("reply_to: find request %s: %w", parent, err)
		}
		if !ok {
			return nil, apierr.NotFound(hintMembers, "reply_to: no request %s is known here", parent)
		}
		if int(info.Hop)+1 > proto.MaxHop {
			s.host.Count(RefusedHopLimit, 1)
			return nil, apierr.Forbidden("hop limit: a follow-up of a hop-%d request would be hop %d > %d", info.Hop, info.Hop+1, proto.MaxHop)
		}
		r.ReplyTo = &parent
		r.Hop = info.Hop + 1
	}
	out, err := s.sendDirect(req.To, proto.KindRequest, func(e *proto.Envelope) { e.Request = r })
	if err != nil {
		return nil, err
	}
	hop := int(r.Hop)
	out.RequestID, out.Hop = r.RequestID.String(), &hop
	return out, nil
}

// Respond answers a received Request, as a DM to the requester.
func (s *Sender) Respond(req api.Respond) (*api.Sent, error) {
	s.host.Acted()
	if err := s.host.MemberToSend(); err != nil {
		return nil, err
	}
	id, err := uuid.Parse(req.RequestID)
	if err != nil {
		return nil, apierr.BadRequest("request id: %v", err)
	}
	st, err := proto.ParseStatus(req.Status)
	if err != nil {
		return nil, apierr.BadRequest("%w", err)
	}
	if s.myRole() == roster.RoleObserver {
		return nil, apierr.Forbidden("role too low: observers may read but not send")
	}
	info, err := s.requester(id, req.To)
	if err != nil {
		return nil, err
	}
	if err := s.checkAnswer(info.From, id); err != nil {
		return nil, err
	}
	resp := &proto.Response{RequestID: id, Status: st}
	if resp.Attachments, err = s.host.AttachFiles(req.Attachments); err != nil {
		return nil, err
	}
	if len(req.Result) > 0 {
		raw, err := proto.JSONToCBOR(req.Result)
		if err != nil {
			return nil, apierr.BadRequest("result: %w", err)
		}
		resp.Result = raw
	}
	out, err := s.sendDirect(info.From.String(), proto.KindResponse, func(e *proto.Envelope) { e.Response = resp })
	if err != nil {
		return nil, err
	}
	s.answers.answered(info.From, id, st)
	s.host.Answered(info.From, id)
	out.RequestID = id.String()
	return out, nil
}

// requester picks the received request a response answers: the one
// request with id id, or, when senders reused the id, the one from to
// (a member by name, fingerprint or key). An ambiguous id is refused,
// naming the candidates by sender.
func (s *Sender) requester(id uuid.UUID, to string) (Received, error) {
	infos, err := s.receivedRequests(id)
	if err != nil {
		return Received{}, fmt.Errorf("find request %s: %w", id, err)
	}
	if len(infos) == 0 {
		return Received{}, apierr.NotFound(s.requestIDHint(id), "no received request has id %s", id)
	}
	if strings.TrimPrefix(strings.TrimSpace(to), "@") != "" {
		m, err := s.host.ResolvePeer(to)
		if err != nil {
			return Received{}, err
		}
		for _, in := range infos {
			if in.From.Equal(m.Key) {
				return in, nil
			}
		}
		return Received{}, apierr.NotFound("list received requests with: meshctl inbox --all", "no request %s came from %s (it came from %s)", id, Label(m), s.senderList(infos))
	}
	if len(infos) > 1 {
		s.host.Count(RespondAmbiguous, 1)
		return Received{}, apierr.New(http.StatusConflict, "name the requester to answer: meshctl respond "+id.String()+" STATUS --to PEER",
			"request id %s is ambiguous: %d members sent a request with it: %s", id, len(infos), s.senderList(infos))
	}
	return infos[0], nil
}

// senderList names requesters by name and fingerprint.
func (s *Sender) senderList(infos []Received) string {
	var names []string
	for _, in := range infos {
		names = append(names, s.host.MemberLabel(in.From))
	}
	return strings.Join(names, ", ")
}

// requestIDHint names the request id when id is the envelope (inbox item)
// id of a request this node received, the usual mix-up; else "".
func (s *Sender) requestIDHint(id uuid.UUID) string {
	const hintRequests = "the request ids of received requests are in: meshctl inbox --all (request_id)"
	held, err := s.cfg.Store.GetByID(id) // every sender's envelope with that id
	if err != nil {
		return hintRequests
	}
	for i := range held {
		se, err := held[i].Envelope()
		if err == nil && se.Kind == proto.KindRequest && se.Request != nil {
			return "that is the envelope id of a request; answer its request id: meshctl respond " + se.Request.RequestID.String() + " STATUS"
		}
	}
	return hintRequests
}

// maxCancelScan bounds the inbox items Cancel looks through for an
// answer that names the peer.
const maxCancelScan = 10000

// Cancel asks the peer working on request id (one of ours) to stop: it
// sends that peer a Request for proto.IntentCancel naming id. The peer is
// req.To, or else the sender of an answer to id in the inbox.
func (s *Sender) Cancel(req api.Cancel) (*api.Sent, error) {
	id, err := uuid.Parse(req.RequestID)
	if err != nil {
		return nil, apierr.BadRequest("request id: %v", err)
	}
	to := req.To
	if to == "" {
		k, ok, err := s.answerer(id)
		if err != nil {
			return nil, fmt.Errorf("find an answer to %s: %w", id, err)
		}
		if !ok {
			return nil, apierr.NotFound("name the peer that has it: meshctl cancel REQUEST_ID --to PEER",
				"no answer to request %s in the inbox names the peer working on it", id)
		}
		to = k.String()
	}
	params, err := json.Marshal(map[string]string{"request_id": id.String()})
	if err != nil {
		return nil, err
	}
	s.host.Count(Cancels, 1)
	return s.Request(api.Request{To: to, Intent: proto.IntentCancel, Params: params})
}

// answerer finds the sender of the newest answer to request id.
func (s *Sender) answerer(id uuid.UUID) (proto.PubKey, bool, error) {
	items, err := s.cfg.Store.Inbox(history.InboxFilter{Limit: maxCancelScan})
	if err != nil {
		return proto.PubKey{}, false, err
	}
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Kind != proto.KindResponse {
			continue
		}
		held, err := s.cfg.Store.GetByID(it.ID)
		if err != nil {
			return proto.PubKey{}, false, err
		}
		for j := range held {
			se, err := held[j].Envelope()
			if err == nil && se.Response != nil && se.Response.RequestID == id {
				return se.From, true, nil
			}
		}
	}
	return proto.PubKey{}, false, nil
}
