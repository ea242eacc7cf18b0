package peers

import (
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// DialIdleWait bounds the dialler's sleep when nothing is due sooner: a
// node with a full mesh wakes this often, not five times a second.
const DialIdleWait = 5 * time.Second

// DueLocked starts, through d, a dial of every member and seed that is
// due: not linked, not being dialled, its backoff over, at most MaxDials
// members at a time, a member's first dial spread (FirstDialDelay). self
// is this node's NodeID and members the roster's size. It returns when
// the next one not started is due (far ahead when none is waiting; soon
// when dials in flight hold it back).
func (t *Table) DueLocked(now time.Time, self proto.NodeID, members int, d Dialer) time.Time {
	next := now.Add(DialIdleWait)
	if t.Closed {
		return next
	}
	dialing := t.DialsLocked()
	for _, p := range t.ByKey {
		if p.Link != nil {
			if at := d.AskMoveLocked(p, now); !at.IsZero() && at.Before(next) {
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
		d.StartDialLocked(p, OrderAddrs(p.Addrs.List()))
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
		d.StartDialLocked(s, s.Addrs.List())
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

// DialDone is the outcome of one dial of a peer, its addresses tried in
// order.
type DialDone struct {
	Failed     []DialFailure   // the addresses that failed, and why
	Linked     *transport.Link // the link made; nil if every address failed
	LinkedAddr transport.Addr  // the address Linked was dialled at
	// Backoff is the redial delay after fails failed dials in a row.
	Backoff func(fails int) time.Duration
	// Removed: a roster this node applied removed it, so a failed dial
	// is retried only after RemovedRetryDelay.
	Removed bool
}

// DialDoneLocked records a dial's outcome in p: the address book's
// verdict on each address, the backoff, why it failed for meshctl
// doctor, and for a seed the key that answered. It returns how many
// addresses the book evicted.
func (t *Table) DialDoneLocked(p *Peer, d DialDone, now time.Time) (evicted int) {
	p.Dialing = false
	if !p.Seed {
		failed := make([]transport.Addr, len(d.Failed))
		for i, f := range d.Failed {
			failed[i] = f.Addr
		}
		evicted = p.Addrs.DialResult(failed, d.LinkedAddr, now)
	}
	p.LastDial = nil
	if d.Linked == nil {
		p.LastDial = d.Failed
		p.Fails++
		p.Next = now.Add(d.Backoff(p.Fails))
		if d.Removed {
			p.Next = now.Add(RemovedRetryDelay())
		}
		return evicted
	}
	p.Fails = 0
	if p.Seed {
		p.Key = d.Linked.PeerKey()
		// The link may be down already (a refusal): the seed waits as
		// long as the member it reached.
		if m := t.ByKey[p.Key]; m != nil && m.Link == nil && m.Next.After(p.Next) {
			p.Next = m.Next
		}
	}
	return evicted
}
