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
	cTxRefusedReplyDepth = newCounter("tx.refused.reply_depth", famSendRefused, "reply_depth")
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
func (n *Node) checkReplyDepth(parent *uuid.UUID) error {
	if parent == nil || n.cfg.MaxReplyDepth <= 0 {
		return nil
	}
	d := n.replies.of(*parent)
	if d <= n.cfg.MaxReplyDepth {
		return nil
	}
	n.metrics.inc(cTxRefusedReplyDepth)
	n.logRL.warn(n.log, "reply refused: its chain is deeper than reply_depth_max", "", "reply_depth",
		"in_reply_to", *parent, "depth", d, "max", n.cfg.MaxReplyDepth)
	return refuse(http.StatusTooManyRequests,
		"an agent loop that answers replies keeps two agents answering each other: answer only messages that are not replies, or start a new thread (no in_reply_to)",
		"reply chain too deep: this reply would be number %d in its chain, past reply_depth_max %d", d, n.cfg.MaxReplyDepth)
}
