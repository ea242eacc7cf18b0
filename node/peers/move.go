package peers

import (
	"os"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
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
func (s *Service) moveAgreeFor(asker bool) time.Duration {
	if asker {
		return 2 * s.cfg.DialTimeout
	}
	return moveWait + 2*s.cfg.DialTimeout
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
func localSocketLocked(p *Peer) (a transport.Addr, told bool) {
	for _, a := range p.Addrs.List() {
		if a.Network != "unix" {
			continue
		}
		if src, ok := p.Addrs.SourceOf(a); !ok || src != SelfLocal {
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
func (s *Service) AskMoveLocked(p *Peer, now time.Time) time.Time {
	pl := p.Link
	if pl == nil || pl.Conn.Network() != "tcp" || p.Dialing || s.cfg.Legacy.LinkMoves {
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
	s.sendLinkMove(pl, proto.MoveAsk)
	s.host.Count(LinkMoveAsked, 1)
	return m.Next
}

func (s *Service) sendLinkMove(pl *Link, step uint8) {
	b, err := proto.Marshal(&proto.LinkMove{Step: step})
	if err != nil {
		return
	}
	s.sendLocked(pl, proto.FrameLinkMove, b)
}

// HandleLinkMove answers a link-move frame from pl.
func (s *Service) HandleLinkMove(pl *Link, payload []byte) {
	if s.cfg.Legacy.LinkMoves {
		s.host.Count(FrameUnknown, 1) // as a node without them
		return
	}
	m, err := proto.ParseLinkMove(payload)
	if err != nil {
		s.host.Count(LinkMoveMalformed, 1)
		s.warnRL("bad link-move frame", pl.Key.Fingerprint(), "link.move.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	now := time.Now()
	s.Lock()
	defer s.Unlock()
	p := s.ByKey[pl.Key]
	if p == nil || p.Link != pl || pl.Conn.Network() != "tcp" {
		s.host.Count(LinkMoveIgnored, 1)
		return
	}
	switch m.Step {
	case proto.MoveAsk:
		if !s.unixLn || p.Dialing {
			// No socket to move to, or a Unix dial of ours is on its way.
			s.host.Count(LinkMoveIgnored, 1)
			return
		}
		if p.Move.AskedOn == pl && now.Sub(p.Move.AskedAt) < moveWait && s.host.Self().NodeID().Less(pl.Key.NodeID()) {
			// Both asked: the lower NodeID's ask goes on, and the
			// peer, seeing ours, agrees to it.
			return
		}
		p.Move.AskedOn = nil
		p.Move.Agreed = now.Add(s.moveAgreeFor(false))
		s.sendLinkMove(pl, proto.MoveAgree)
		s.host.Count(LinkMoveAgreed, 1)
	case proto.MoveAgree:
		if p.Move.AskedOn != pl || now.Sub(p.Move.AskedAt) >= moveWait || p.Dialing {
			s.host.Count(LinkMoveIgnored, 1)
			return
		}
		a, _ := localSocketLocked(p)
		if a.Network == "" {
			s.host.Count(LinkMoveIgnored, 1)
			return
		}
		p.Move.AskedOn = nil
		p.Move.Agreed = now.Add(s.moveAgreeFor(true))
		p.Dialing = true
		key := pl.Key
		s.cfg.Group.Go(func() { s.dialMove(p, key, a) })
	}
}

// dialMove dials member key's Unix socket a after it agreed to move.
func (s *Service) dialMove(p *Peer, key proto.PubKey, a transport.Addr) {
	l, err := s.dial(a, &key)
	if err == nil {
		s.AddLink(l)
	}
	s.Lock()
	p.Dialing = false
	moved := p.Link != nil && p.Link.Conn == l
	if moved {
		p.Move.Fails = 0
		p.Move.Next = time.Time{}
	}
	s.Unlock()
	if moved {
		s.host.Count(LinkMoved, 1)
		s.cfg.Log.Info("link moved to the Unix socket", "peer", key.Fingerprint(), "addr", a.String())
		return
	}
	s.host.Count(LinkMoveFailed, 1)
	reason := "closed"
	if err != nil {
		reason = err.Error()
	}
	s.warnRL("link stays on TCP", key.Fingerprint(), "link.move.failed",
		"peer", key.Fingerprint(), "socket", a.String(), "err", reason)
	s.Wake()
}

// awaitMove handles a goodbye on pl, the peer's TCP link, while a move
// is agreed with the peer: the asker registered its Unix link and said
// goodbye on pl before this node registered that link (its handshake
// ends later here). Closing pl now would leave the peer without a link
// for a moment, and drop what fan-out sends it meanwhile. So pl stays
// the peer's link until the Unix link wins the duplicate pair (§14.2),
// which moves pl's queued frames to it; the peer reads pl on until then
// (for at most a second). If no Unix link comes within MoveGrace, pl is
// closed as after any goodbye. It reports whether it took the goodbye.
func (s *Service) awaitMove(pl *Link) bool {
	s.Lock()
	p := s.ByKey[pl.Key]
	ok := p != nil && p.Link == pl && pl.Conn.Network() == "tcp" && time.Now().Before(p.Move.Agreed)
	s.Unlock()
	if !ok {
		return false
	}
	s.cfg.Group.Go(func() {
		t := time.NewTimer(MoveGrace)
		defer t.Stop()
		select {
		case <-pl.Conn.Done():
			return
		case <-s.cfg.Context.Done():
		case <-t.C:
			s.host.Count(LinkMoveLate, 1)
		}
		s.CloseAsync(pl, "goodbye")
	})
	return true
}
