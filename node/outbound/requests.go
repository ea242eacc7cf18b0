package outbound

import (
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fifo"
	"github.com/meshd/meshd/proto"
)

// maxRequests bounds the request book; the oldest are forgotten first and
// found again in the store when needed (Sender.receivedRequests).
const maxRequests = 10000

// maxRequestSenders bounds the requesters remembered for one request id.
const maxRequestSenders = 16

// requestEntry is who sent a Request with one request id: request ids are
// chosen by senders, so several may share one. complete says the store
// was searched for it, so infos holds every requester.
type requestEntry struct {
	infos    []Received
	complete bool
}

// requestBook remembers received Requests by request id, so a Response
// goes back to the requester and a follow-up carries hop + 1.
type requestBook struct {
	mu sync.Mutex
	m  *fifo.Map[uuid.UUID, *requestEntry] // guarded by mu
}

func newRequestBook() *requestBook {
	return &requestBook{m: fifo.New[uuid.UUID, *requestEntry](maxRequests)}
}

// NoteRequest records se, a Request this node received and stored, so a
// response goes back to its requester and a follow-up carries its hop + 1.
func (s *Sender) NoteRequest(se *proto.SignedEnvelope) { s.requests.received(se) }

func (b *requestBook) received(se *proto.SignedEnvelope) {
	b.add(se.Request.RequestID, false, Received{From: se.From, Hop: se.Request.Hop})
}

// add records requesters of id; complete marks the entry as holding all.
func (b *requestBook) add(id uuid.UUID, complete bool, infos ...Received) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m.Get(id)
	if !ok {
		e = &requestEntry{}
		b.m.Put(id, e)
	}
	e.complete = e.complete || complete
	for _, in := range infos {
		if !slices.ContainsFunc(e.infos, func(x Received) bool { return x.From.Equal(in.From) }) && len(e.infos) < maxRequestSenders {
			e.infos = append(e.infos, in)
		}
	}
}

// get returns the requesters of id if the entry holds them all.
func (b *requestBook) get(id uuid.UUID) ([]Received, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m.Get(id)
	if !ok || !e.complete {
		return nil, false
	}
	return slices.Clone(e.infos), true
}

// receivedRequests returns who sent a received Request with request id id
// (several, if senders reused it) and each one's hop: from the book once
// the store was searched for id, else from the inbox in the store (for a
// request received before a restart, forgotten to bound the book, or
// asked for between its commit and its entry in the book).
func (s *Sender) receivedRequests(id uuid.UUID) ([]Received, error) {
	if infos, ok := s.requests.get(id); ok {
		return infos, nil
	}
	ses, err := s.cfg.Store.FindRequests(id, maxRequestSenders)
	if err != nil {
		return nil, err
	}
	infos := make([]Received, 0, len(ses))
	for _, se := range ses {
		if se.From.Equal(s.cfg.Self) {
			// Our own request, in the inbox as a delivery_failed item.
			continue
		}
		infos = append(infos, Received{From: se.From, Hop: se.Request.Hop})
	}
	s.requests.add(id, true, infos...)
	out, _ := s.requests.get(id)
	return out, nil
}

// receivedRequest returns the requester of id and its hop: the one
// requester, or, when senders reused the id, the highest hop among them
// (so a follow-up never escapes the hop limit).
func (s *Sender) receivedRequest(id uuid.UUID) (Received, bool, error) {
	infos, err := s.receivedRequests(id)
	if err != nil || len(infos) == 0 {
		return Received{}, false, err
	}
	best := infos[0]
	for _, in := range infos[1:] {
		if in.Hop > best.Hop {
			best = in
		}
	}
	return best, true, nil
}
