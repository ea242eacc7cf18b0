package node

import (
	"os"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famLinkMoves = newFamily("meshd_link_moves_total", "Steps of moving a TCP link to a same-host peer's Unix socket, by step.", "step")

	cLinkMoveAsked     = newCounter("link.move.asked", famLinkMoves, "asked")
	cLinkMoveMalformed = newCounter("link.move.malformed", famLinkMoves, "malformed")
	cLinkMoveIgnored   = newCounter("link.move.ignored", famLinkMoves, "ignored")
	cLinkMoveAgreed    = newCounter("link.move.agreed", famLinkMoves, "agreed")
	cLinkMoved         = newCounter("link.moved", famLinkEvents, "moved_unix")
	cLinkMoveFailed    = newCounter("link.move.failed", famLinkMoves, "failed")
	cLinkMoveLate      = newCounter("link.move.late", famLinkMoves, "late")
)

// Moving a same-host link to the Unix socket (PROTOCOL.md §14.12). A
// link learnt over TCP (a seed, gossip) would otherwise stay on TCP for
// its life: a node never dials a peer it holds a link to. So a node
// holding a TCP link to a member that told it, over a link from this
// host, a unix:// address whose socket file exists here asks the member,
// on the TCP link, to move (a link-move frame, step ask). A member that
// knows the frame agrees (step agree) and, until moveAgreeFor has passed,
// keeps a Unix link from the asker over its TCP link in a duplicate pair
// (§14.2). The asker then dials the socket expecting the member's key: a
// socket of another node, of another user or of a container that only
// shares the path answers with another key or not at all, and the link
// stays on TCP. The TCP link is retired as the loser of a duplicate pair,
// its queued frames moved to the Unix link.
//
// An older node counts the ask as an unknown frame and never agrees, so
// it never faces a duplicate pair decided by a rule it does not know.

const (
	// moveWait is how long an ask waits for the agreement.
	moveWait = 10 * time.Second
	// moveRetryMin and moveRetryMax bound the delay before asking a
	// member again after an ask that was not answered or a dial that
	// failed; it doubles in between.
	moveRetryMin = time.Minute
	moveRetryMax = 30 * time.Minute
)

// moveAgreeFor is how long an agreement holds: at the asker, from the
// agreement, for its dial; at the member, from the ask, for the asker to
// read the agreement (moveWait) and dial.
func (n *Node) moveAgreeFor(asker bool) time.Duration {
	if asker {
		return 2 * n.cfg.DialTimeout
	}
	return moveWait + 2*n.cfg.DialTimeout
}

func moveRetry(fails int) time.Duration {
	d := moveRetryMin
	for i := 1; i < fails && d < moveRetryMax; i++ {
		d *= 2
	}
	return min(d, moveRetryMax)
}

// localSocketLocked returns a unix:// address of p that p itself told
// over a link from this host and whose socket file exists here, or a
// zero Addr; told says whether p told one at all.
func localSocketLocked(p *peers.Peer) (a transport.Addr, told bool) {
	for _, a := range p.Addrs.List() {
		if a.Network != "unix" {
			continue
		}
		if src, ok := p.Addrs.SourceOf(a); !ok || src != peers.SelfLocal {
			continue
		}
		told = true
		if fi, err := os.Stat(a.Address); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return a, true
		}
	}
	return transport.Addr{}, told
}

// AskMoveLocked asks p to move its TCP link to p's Unix socket, if it is
// time to. It returns when to look again (zero: not waiting on p).
func (h *peerHost) AskMoveLocked(p *peers.Peer, now time.Time) time.Time {
	n := (*Node)(h)
	pl := p.Link
	if pl == nil || pl.Conn.Network() != "tcp" || p.Dialing || n.test.oldLinkMoves() {
		return time.Time{}
	}
	m := &p.Move
	if m.AskedOn == pl && now.Sub(m.AskedAt) < moveWait {
		return time.Time{}
	}
	if now.Before(m.Agreed) {
		return m.Agreed // we agreed to the peer's ask: its dial comes
	}
	if now.Before(m.Next) {
		return m.Next
	}
	if a, told := localSocketLocked(p); a.Network == "" {
		if !told {
			return time.Time{}
		}
		// A socket of another host, or not there yet: look again later.
		m.Next = now.Add(moveRetryMin)
		return m.Next
	}
	m.AskedOn, m.AskedAt = pl, now
	m.Fails++
	m.Next = now.Add(moveRetry(m.Fails))
	n.sendLinkMove(pl, proto.MoveAsk)
	n.metrics.inc(cLinkMoveAsked)
	return m.Next
}

func (n *Node) sendLinkMove(pl *peers.Link, step uint8) {
	b, err := proto.Marshal(&proto.LinkMove{Step: step})
	if err != nil {
		return
	}
	n.sendFrame(pl, proto.FrameLinkMove, b)
}

// handleLinkMove answers a link-move frame from pl.
func (n *Node) handleLinkMove(pl *peers.Link, payload []byte) {
	m, err := proto.ParseLinkMove(payload)
	if err != nil {
		n.metrics.inc(cLinkMoveMalformed)
		n.logRL.warn(n.log, "bad link-move frame", pl.Key.Fingerprint(), "link.move.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	now := time.Now()
	n.peers.Lock()
	defer n.peers.Unlock()
	p := n.peers.ByKey[pl.Key]
	if p == nil || p.Link != pl || pl.Conn.Network() != "tcp" {
		n.metrics.inc(cLinkMoveIgnored)
		return
	}
	switch m.Step {
	case proto.MoveAsk:
		if !n.hasUnixListener() || p.Dialing {
			// No socket to move to, or a Unix dial of ours is on its way.
			n.metrics.inc(cLinkMoveIgnored)
			return
		}
		if p.Move.AskedOn == pl && now.Sub(p.Move.AskedAt) < moveWait && n.id.Pub.NodeID().Less(pl.Key.NodeID()) {
			// Both asked: the lower NodeID's ask goes on, and the
			// peer, seeing ours, agrees to it.
			return
		}
		p.Move.AskedOn = nil
		p.Move.Agreed = now.Add(n.moveAgreeFor(false))
		n.sendLinkMove(pl, proto.MoveAgree)
		n.metrics.inc(cLinkMoveAgreed)
	case proto.MoveAgree:
		if p.Move.AskedOn != pl || now.Sub(p.Move.AskedAt) >= moveWait || p.Dialing {
			n.metrics.inc(cLinkMoveIgnored)
			return
		}
		a, _ := localSocketLocked(p)
		if a.Network == "" {
			n.metrics.inc(cLinkMoveIgnored)
			return
		}
		p.Move.AskedOn = nil
		p.Move.Agreed = now.Add(n.moveAgreeFor(true))
		p.Dialing = true
		n.wg.Add(1)
		go n.dialMove(p, pl.Key, a)
	}
}

// dialMove dials member key's Unix socket a after it agreed to move.
func (n *Node) dialMove(p *peers.Peer, key proto.PubKey, a transport.Addr) {
	defer n.wg.Done()
	l, err := n.dial(a, &key)
	if err == nil {
		n.peers.AddLink(l)
	}
	n.peers.Lock()
	p.Dialing = false
	moved := p.Link != nil && p.Link.Conn == l
	if moved {
		p.Move.Fails = 0
		p.Move.Next = time.Time{}
	}
	n.peers.Unlock()
	if moved {
		n.metrics.inc(cLinkMoved)
		n.log.Info("link moved to the Unix socket", "peer", key.Fingerprint(), "addr", a.String())
		return
	}
	n.metrics.inc(cLinkMoveFailed)
	n.logRL.warn(n.log, "link stays on TCP", key.Fingerprint(), "link.move.failed",
		"peer", key.Fingerprint(), "socket", a.String(), "err", errString(err))
	n.wake()
}

// awaitMove handles a goodbye on pl, the peer's TCP link, while a move
// is agreed with the peer: the asker registered its Unix link and said
// goodbye on pl before this node registered that link (its handshake
// ends later here). Closing pl now would leave the peer without a link
// for a moment, and drop what fan-out sends it meanwhile. So pl stays
// the peer's link until the Unix link wins the duplicate pair (§14.2),
// which moves pl's queued frames to it; the peer reads pl on until then
// (for at most a second). If no Unix link comes within peers.MoveGrace, pl is
// closed as after any goodbye. It reports whether it took the goodbye.
func (n *Node) awaitMove(pl *peers.Link) bool {
	n.peers.Lock()
	p := n.peers.ByKey[pl.Key]
	ok := p != nil && p.Link == pl && pl.Conn.Network() == "tcp" && time.Now().Before(p.Move.Agreed)
	n.peers.Unlock()
	if !ok {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTimer(peers.MoveGrace)
		defer t.Stop()
		select {
		case <-pl.Conn.Done():
			return
		case <-n.ctx.Done():
		case <-t.C:
			n.metrics.inc(cLinkMoveLate)
		}
		n.closeLinkAsync(pl, "goodbye")
	}()
	return true
}

// hasUnixListener reports whether the node accepts links on a Unix
// socket.
func (n *Node) hasUnixListener() bool {
	for _, ln := range n.listeners {
		if ln.Addr().Network == "unix" {
			return true
		}
	}
	return false
}
