package node

import (
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// inboxNotifier wakes waiters when a waking item arrives.
type inboxNotifier struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu: closed on the next waking item
}

func newInboxNotifier() *inboxNotifier { return &inboxNotifier{ch: make(chan struct{})} }

// wait returns a channel closed at the next waking item.
func (i *inboxNotifier) wait() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.ch
}

func (i *inboxNotifier) notify(wakes bool) {
	if !wakes {
		return
	}
	i.mu.Lock()
	close(i.ch)
	i.ch = make(chan struct{})
	i.mu.Unlock()
}

// requestInfo is what we remember of a Request to answer it or follow it up.
type requestInfo struct {
	from proto.PubKey // who asked
	hop  uint8
}

// maxRequests bounds the request book; the oldest are forgotten first and
// found again in the store when needed (Node.receivedRequest).
const maxRequests = 10000

// requestBook remembers received Requests by request id, so a Response
// goes back to the requester and a follow-up carries hop + 1.
type requestBook struct {
	mu sync.Mutex
	m  *fifoMap[uuid.UUID, requestInfo] // guarded by mu
}

func newRequestBook() *requestBook {
	return &requestBook{m: newFIFOMap[uuid.UUID, requestInfo](maxRequests)}
}

func (b *requestBook) received(se *proto.SignedEnvelope) {
	b.add(se.Request.RequestID, requestInfo{from: se.From, hop: se.Request.Hop})
}

func (b *requestBook) add(id uuid.UUID, info requestInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m.put(id, info)
}

func (b *requestBook) get(id uuid.UUID) (requestInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m.get(id)
}

// receivedRequest returns who sent the received Request id and its hop:
// from the book, or from the inbox in the store for a request the book
// does not hold (received before a restart, forgotten to bound the book,
// or asked for between its commit and its entry in the book).
func (n *Node) receivedRequest(id uuid.UUID) (requestInfo, bool, error) {
	if info, ok := n.requests.get(id); ok {
		return info, true, nil
	}
	se, err := n.store.FindRequest(id)
	if errors.Is(err, history.ErrNotFound) {
		return requestInfo{}, false, nil
	}
	if err != nil {
		return requestInfo{}, false, err
	}
	n.requests.received(se)
	return requestInfo{from: se.From, hop: se.Request.Hop}, true, nil
}
