package node

import (
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fifo"
	"github.com/meshd/meshd/proto"
)

// requestInfo is what we remember of a Request to answer it or follow it up.
type requestInfo struct {
	from proto.PubKey // who asked
	hop  uint8
}

// maxRequests bounds the request book; the oldest are forgotten first and
// found again in the store when needed (Node.receivedRequests).
const maxRequests = 10000

// maxRequestSenders bounds the requesters remembered for one request id.
const maxRequestSenders = 16

// requestEntry is who sent a Request with one request id: request ids are
// chosen by senders, so several may share one. complete says the store
// was searched for it, so infos holds every requester.
type requestEntry struct {
	infos    []requestInfo
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

func (b *requestBook) received(se *proto.SignedEnvelope) {
	b.add(se.Request.RequestID, false, requestInfo{from: se.From, hop: se.Request.Hop})
}

// add records requesters of id; complete marks the entry as holding all.
func (b *requestBook) add(id uuid.UUID, complete bool, infos ...requestInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.m.Get(id)
	if !ok {
		e = &requestEntry{}
		b.m.Put(id, e)
	}
	e.complete = e.complete || complete
	for _, in := range infos {
		if !slices.ContainsFunc(e.infos, func(x requestInfo) bool { return x.from.Equal(in.from) }) && len(e.infos) < maxRequestSenders {
			e.infos = append(e.infos, in)
		}
	}
}

// get returns the requesters of id if the entry holds them all.
func (b *requestBook) get(id uuid.UUID) ([]requestInfo, bool) {
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
func (n *Node) receivedRequests(id uuid.UUID) ([]requestInfo, error) {
	if infos, ok := n.requests.get(id); ok {
		return infos, nil
	}
	ses, err := n.store.FindRequests(id, maxRequestSenders)
	if err != nil {
		return nil, err
	}
	infos := make([]requestInfo, 0, len(ses))
	for _, se := range ses {
		if se.From.Equal(n.id.Pub) {
			// Our own request, in the inbox as a delivery_failed item.
			continue
		}
		infos = append(infos, requestInfo{from: se.From, hop: se.Request.Hop})
	}
	n.requests.add(id, true, infos...)
	out, _ := n.requests.get(id)
	return out, nil
}

// receivedRequest returns the requester of id and its hop: the one
// requester, or, when senders reused the id, the highest hop among them
// (so a follow-up never escapes the hop limit).
func (n *Node) receivedRequest(id uuid.UUID) (requestInfo, bool, error) {
	infos, err := n.receivedRequests(id)
	if err != nil || len(infos) == 0 {
		return requestInfo{}, false, err
	}
	best := infos[0]
	for _, in := range infos[1:] {
		if in.hop > best.hop {
			best = in
		}
	}
	return best, true, nil
}

// unsolicited reports whether se, a Response, answers no Request this node
// sent to se.From: the node keeps the recipient of each Request it sent
// (as long as its delivery record), and a Response from anyone else, who
// learned or guessed the request id, is dropped (PROTOCOL §15 step 5).
func (n *Node) unsolicited(se *proto.SignedEnvelope) bool {
	peer, ok, err := n.store.RequestRecipient(se.Response.RequestID)
	if err != nil {
		n.log.Warn("outgoing request lookup", "request_id", se.Response.RequestID, "err", err)
		return true
	}
	return !ok || !(peer.Equal(se.From) || sameMember(n.Roster(), peer, se.From))
}
