package peers

import (
	"errors"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// retireLoser closes loser, the link of a duplicate pair that lost to
// winner, with a goodbye, and queues the frames it still held unsent on
// winner, in their order. Written on the loser, they might find a peer
// that no longer reads it (an older build stops at once, and a loser the
// peer never started is not read at all) and be lost: a DM would go again
// at the node's next queue flush, but a channel message would reach the
// peer only at its next history catch-up. The caller holds the mutex and
// has not yet published winner, so that the node's fan-out puts later
// frames behind these on winner (a frame refused by the closed loser is
// sent on the peer's link of the moment).
//
// Frames about the mesh's content move (Rehomed); frames about the
// link's own session do not: winner's link-up sends them afresh.
func (s *Service) retireLoser(loser, winner *Link) {
	loser.retired.Store(true)
	s.sendRehomed(loser.Conn.CloseAndDrain(GoodbyeFrame("duplicate link")), loser, winner)
}

// sendRehomed sends on winner the frames fs taken from loser that move
// (Rehomed), in order, and tells the host how many moved.
func (s *Service) sendRehomed(fs [][]byte, loser, winner *Link) {
	moved := 0
	var dropped []proto.FrameType
	for _, f := range fs {
		if len(f) == 0 || !Rehomed(proto.FrameType(f[0])) {
			continue
		}
		if err := winner.Conn.Send(f); err != nil {
			dropped = append(dropped, proto.FrameType(f[0]))
			continue
		}
		moved++
	}
	if moved+len(dropped) > 0 {
		s.host.Rehomed(loser, moved, dropped)
	}
}

// retireNewLoser closes pl, a link that lost its duplicate pair to the
// link already registered, before it was started. The peer may have
// registered pl first and sent on it before making the same choice: pl
// reads on until the peer's goodbye ends the stream (for at most a
// second, see [transport.Link.CloseAndDrain]), and hands the envelopes
// and acks it reads to the host, as from any link. The rest (peer lists,
// rosters, policies) is for a session that never started; the peer sends
// it again on the kept link.
func (s *Service) retireNewLoser(pl *Link) {
	pl.retired.Store(true)
	pl.Conn.Start(func(frame []byte) {
		if len(frame) == 0 {
			return
		}
		switch proto.FrameType(frame[0]) {
		case proto.FrameEnvelope, proto.FrameAck:
			s.host.Frame(pl, frame)
		}
	})
	// Anything queued already (an ack for what it read) goes on the
	// kept link.
	if fs := pl.Conn.CloseAndDrain(GoodbyeFrame("duplicate link")); len(fs) > 0 {
		s.Lock()
		kept := s.LinkedLocked(pl.Key)
		s.Unlock()
		if kept != nil {
			s.sendRehomed(fs, pl, kept)
		}
	}
	s.cfg.Group.Go(func() { <-pl.Conn.Done() })
}

// sessionFrameSuperseded reports whether a frame of type t that pl
// refused with err needs no report: pl lost a duplicate pair, and t is a
// frame of the link's own session (not Rehomed), which the winner's
// link-up sends afresh. The host's link-up for pl may still be running
// when the winner replaces it (a move to a Unix socket that the peer
// made as soon as our TCP link reached it), and its frames then find pl
// closed.
func sessionFrameSuperseded(pl *Link, t proto.FrameType, err error) bool {
	return pl.Retired() && !Rehomed(t) && errors.Is(err, transport.ErrClosed)
}

// AckVia returns the link to acknowledge on for envelopes that came on
// pl: pl, or the peer's link of the moment once pl is closing (envelopes
// read by a link that lost a duplicate pair).
func (s *Service) AckVia(pl *Link) *Link {
	if pl.Conn.Err() == nil {
		return pl
	}
	s.Lock()
	defer s.Unlock()
	if cur := s.LinkedLocked(pl.Key); cur != nil {
		return cur
	}
	return pl
}

// MoveGrace bounds how long a TCP link stays the peer's link while a
// move to its Unix socket is under way: a TCP link the peer said goodbye
// to waits this long for the Unix link to retire it, and a Unix link
// this node dialled retires the TCP link at the latest after it.
const MoveGrace = 2 * time.Second

// MovedLocked applies the agreement to move p's link to its Unix socket
// (the rule that comes before rules 1 and 2 of §14.2) to a pair of links
// on networks oldNet (the registered link) and newNet: while the
// agreement holds, of a Unix and a TCP link the Unix one is kept, and
// the agreement is used up. decided is false when the agreement does
// not decide.
func MovedLocked(p *Peer, oldNet, newNet string, now time.Time) (keepNew, decided bool) {
	if p == nil || now.After(p.Move.Agreed) {
		return false, false
	}
	switch {
	case oldNet == "unix" && newNet == "tcp":
	case oldNet == "tcp" && newNet == "unix":
		keepNew = true
	default:
		return false, false
	}
	p.Move.Agreed = time.Time{}
	return keepNew, true
}

// frameHandler returns the frame handler of pl. When pl is the Unix link
// this node dialled to move the peer's TCP link old, old is retired only
// once the peer has taken pl: at pl's first frame (the peer sends its
// link-up frames on pl only after registering it), when pl ends, or
// after MoveGrace. Until then old stays open both ways, so the peer,
// whose link old still is, neither loses it for a moment (its side of
// old would end at our goodbye) nor has its frames refused; ours go on
// pl already.
func (s *Service) frameHandler(pl, old *Link) func([]byte) {
	if old == nil {
		return func(frame []byte) { s.host.Frame(pl, frame) }
	}
	var once sync.Once
	retire := func() {
		once.Do(func() { s.retireLoser(old, pl) })
	}
	s.cfg.Group.Go(func() {
		t := time.NewTimer(MoveGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-pl.Conn.Done():
		case <-s.cfg.Context.Done():
		}
		retire()
	})
	return func(frame []byte) {
		retire()
		s.host.Frame(pl, frame)
	}
}
