package node

import (
	"net/http"
	"sync"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fifo"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	cRespondRefusedTwice = newEvent("respond.refused.twice")
)

// answerBook remembers the final answer this node sent to each request,
// so that a second one is refused: a request gets one completed, rejected
// or failed answer (an accepted answer may come before it). It is bounded
// like the request book and forgets at a restart.
type answerBook struct {
	mu sync.Mutex
	m  *fifo.Map[answerKey, proto.Status] // guarded by mu
}

// answerKey names a received request: request ids are chosen by senders,
// so two requesters' requests may share one.
type answerKey struct {
	from proto.PubKey
	id   uuid.UUID
}

func newAnswerBook() *answerBook {
	return &answerBook{m: fifo.New[answerKey, proto.Status](maxRequests)}
}

// checkAnswer refuses a response to request id that would follow a final
// one, and hints at the request id when id names the envelope of a
// received request instead.
func (n *Node) checkAnswer(from proto.PubKey, id uuid.UUID) error {
	n.answers.mu.Lock()
	prev, ok := n.answers.m.Get(answerKey{from, id})
	n.answers.mu.Unlock()
	if ok && prev.Final() {
		n.metrics.inc(cRespondRefusedTwice)
		return refuse(http.StatusConflict, "a request gets one final answer (completed, rejected or failed); send accepted or progress first when the work takes time",
			"request %s was already answered %s", id, prev)
	}
	return nil
}

// answered records a response sent to request id.
func (n *Node) answered(from proto.PubKey, id uuid.UUID, st proto.Status) {
	n.answers.mu.Lock()
	defer n.answers.mu.Unlock()
	k := answerKey{from, id}
	if prev, ok := n.answers.m.Get(k); ok && prev.Final() {
		return
	}
	n.answers.m.Put(k, st)
}

// requestIDHint names the request id when id is the envelope (inbox item)
// id of a request this node received, the usual mix-up; else "".
func (n *Node) requestIDHint(id uuid.UUID) string {
	const hintRequests = "the request ids of received requests are in: meshctl inbox --all (request_id)"
	held, err := n.store.GetByID(id) // every sender's envelope with that id
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
