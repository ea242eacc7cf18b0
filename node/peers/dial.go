package peers

import (
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// DialIdleWait bounds the dialler's sleep when nothing is due sooner: a
// node with a full mesh wakes this often, not five times a second.
const DialIdleWait = 5 * time.Second

// DialHooks is what the dial scheduler asks of the node.
type DialHooks struct {
	// AskMove runs for each linked member: it may ask the member to move
	// the link to its Unix socket, and returns when it next should look
	// (zero: no need).
	AskMove func(p *Peer, now time.Time) time.Time
	// Start marks p as being dialled and starts a dial of addrs.
	Start func(p *Peer, addrs []transport.Addr)
}

// DueLocked starts, through h, a dial of every member and seed that is
// due: not linked, not being dialled, its backoff over, at most MaxDials
// members at a time, a member's first dial spread (FirstDialDelay). self
// is this node's NodeID and members the roster's size. It returns when
// the next one not started is due (far ahead when none is waiting; soon
// when dials in flight hold it back).
func (t *Table) DueLocked(now time.Time, self proto.NodeID, members int, h DialHooks) time.Time {
	next := now.Add(DialIdleWait)
	if t.Closed {
		return next
	}
	dialing := t.DialsLocked()
	for _, p := range t.ByKey {
		if p.Link != nil {
			if at := h.AskMove(p, now); !at.IsZero() && at.Before(next) {
				next = at
			}
			continue
		}
		if p.Dialing || p.Addrs.Len() == 0 {
			continue
		}
		if now.Before(p.Next) || p.spreadFirstDial(now, self, members) {
			if p.Next.Before(next) {
				next = p.Next
			}
			continue
		}
		if dialing >= MaxDials {
			// The rest when these are done (the node wakes the loop as a
			// dial ends or a link goes down).
			next = now.Add(50 * time.Millisecond)
			break
		}
		dialing++
		h.Start(p, OrderAddrs(p.Addrs.List()))
	}
	for _, s := range t.Seeds {
		if s.Dialing {
			continue
		}
		if now.Before(s.Next) {
			if s.Next.Before(next) {
				next = s.Next
			}
			continue
		}
		if !s.Key.IsZero() {
			if m := t.ByKey[s.Key]; m != nil && (m.Link != nil || m.Dialing) {
				continue
			}
		}
		h.Start(s, s.Addrs.List())
	}
	return next
}

// spreadFirstDial puts off the first dial of p, which is due at now, and
// reports whether it did (see FirstDialDelay). Only a member never
// dialled nor refused is put off, once.
func (p *Peer) spreadFirstDial(now time.Time, self proto.NodeID, members int) bool {
	if p.Spread || p.Fails > 0 || p.Refusals > 0 {
		return false
	}
	p.Spread = true
	p.Next = now.Add(FirstDialDelay(self, p.Key.NodeID(), members))
	return true
}
