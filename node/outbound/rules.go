package outbound

import (
	"net/http"
	"sync"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/fifo"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// Reply depth (docs/AGENTS.md "Loops that end"; PROTOCOL.md §6.1): a
// message that answers another (in_reply_to) is one deeper in its reply
// chain than the message it answers, as a follow-up request is one hop
// deeper than its parent. meshd counts the depth of the messages it sends
// and receives, and refuses to send a reply deeper than MaxReplyDepth: two
// agents that answer each other's answers stop there instead of trading
// messages for ever. Nothing new goes on the wire: each side counts the
// chain from the in_reply_to it already carries.

// maxReplyDepths bounds the depths remembered; the oldest are forgotten
// first, and a reply to a forgotten message counts as depth 1.
const maxReplyDepths = 100000

// replyDepths remembers the reply depth of recent messages by id. It is
// safe for concurrent use.
type replyDepths struct {
	mu sync.Mutex
	m  *fifo.Map[uuid.UUID, int] // guarded by mu
}

func newReplyDepths() *replyDepths {
	return &replyDepths{m: fifo.New[uuid.UUID, int](maxReplyDepths)}
}

// of returns the depth of a message that answers parent: one more than
// parent's (0 if parent is not a reply, or not known).
func (r *replyDepths) of(parent uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, _ := r.m.Get(parent)
	return d + 1
}

// note records the depth of m (sent or received), if it is a reply.
func (r *replyDepths) note(id uuid.UUID, m *proto.Message) {
	if m == nil || m.InReplyTo == nil {
		return
	}
	d := r.of(*m.InReplyTo)
	r.mu.Lock()
	r.m.Put(id, d)
	r.mu.Unlock()
}

// checkReplyDepth refuses a reply to parent deeper than MaxReplyDepth.
func (s *Sender) checkReplyDepth(parent *uuid.UUID) error {
	if parent == nil || s.cfg.MaxReplyDepth <= 0 {
		return nil
	}
	d := s.replies.of(*parent)
	if d <= s.cfg.MaxReplyDepth {
		return nil
	}
	s.host.Count(RefusedReplyDepth, 1)
	s.warnLimited("reply refused: its chain is deeper than reply_depth_max", "", "reply_depth",
		"in_reply_to", *parent, "depth", d, "max", s.cfg.MaxReplyDepth)
	return apierr.New(http.StatusTooManyRequests,
		"an agent loop that answers replies keeps two agents answering each other: answer only messages that are not replies, or start a new thread (no in_reply_to)",
		"reply chain too deep: this reply would be number %d in its chain, past reply_depth_max %d", d, s.cfg.MaxReplyDepth)
}

// maxAnswers bounds the answer book, like the node's request book.
const maxAnswers = 10000

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
	return &answerBook{m: fifo.New[answerKey, proto.Status](maxAnswers)}
}

// final returns the final answer sent to request id of from, if any.
func (b *answerBook) final(from proto.PubKey, id uuid.UUID) (proto.Status, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, ok := b.m.Get(answerKey{from, id})
	return prev, ok && prev.Final()
}

// answered records a response sent to request id; a final answer stays.
func (b *answerBook) answered(from proto.PubKey, id uuid.UUID, st proto.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := answerKey{from, id}
	if prev, ok := b.m.Get(k); ok && prev.Final() {
		return
	}
	b.m.Put(k, st)
}

// checkAnswer refuses a response to request id that would follow a final
// one.
func (s *Sender) checkAnswer(from proto.PubKey, id uuid.UUID) error {
	if prev, ok := s.answers.final(from, id); ok {
		s.host.Count(RespondTwice, 1)
		return apierr.New(http.StatusConflict, "a request gets one final answer (completed, rejected or failed); send accepted or progress first when the work takes time",
			"request %s was already answered %s", id, prev)
	}
	return nil
}
