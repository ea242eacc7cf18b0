package peers

import (
	"context"
	"errors"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

var _ Dialer = (*Service)(nil)

// StartDialLocked marks p as being dialled and starts the dial.
func (s *Service) StartDialLocked(p *Peer, addrs []transport.Addr) {
	p.Dialing = true
	key := p.Key
	s.cfg.Group.Go(func() { s.dialPeer(p, key, addrs) })
}

// dialPeer tries addrs in order until one links, expecting key (none when
// zero), then updates p's backoff. key is p's key as the caller read it
// under the table's mutex. A seed whose address now hosts another member
// (a reinstall) is dialled again without expectation, and learns the key.
func (s *Service) dialPeer(p *Peer, key proto.PubKey, addrs []transport.Addr) {
	var expect *proto.PubKey
	if !key.IsZero() {
		expect = &key
	}
	var l *transport.Link
	var err error
	var why []DialFailure
	var linked transport.Addr
	for _, a := range addrs {
		l, err = s.dial(a, expect)
		if err != nil && p.Seed && expect != nil && errors.Is(err, transport.ErrUnexpectedPeer) {
			l, err = s.dial(a, nil)
		}
		if err == nil {
			linked = a
			break
		}
		why = append(why, DialFailure{Addr: a, Err: err})
	}
	if err == nil {
		// Registered before dialing is cleared, so that dialDue does not
		// start a second dial of a peer just linked.
		s.AddLink(l)
	} else if p.Seed {
		// A seed of another org: the host may knock to be listed there.
		s.host.OtherOrg(OtherOrg{Seed: why})
	}
	var fm *FormerMemberError
	var gone string
	done := DialDone{Failed: why, LinkedAddr: linked, Backoff: s.Backoff, Removed: s.RemovedSelf()}
	if err == nil {
		done.Linked = l
	}
	s.Lock()
	if p.Seed && errors.As(err, &fm) {
		gone = s.dropSeedLocked(p)
	}
	evicted := s.DialDoneLocked(p, done, time.Now())
	fails := p.Fails
	s.Unlock()
	if evicted > 0 {
		s.host.Count(AddrEvicted, uint64(evicted))
	}
	if gone != "" {
		s.SeedsGone([]string{gone})
		return
	}
	s.Wake() // a place for a dial held back by MaxDials
	if err == nil {
		return
	}
	log := s.cfg.Log
	if !p.Seed {
		log.Debug("dial failed", "peer", key.Fingerprint(), "err", err)
		return
	}
	s.host.Count(DialSeedFailed, 1)
	lvl := log.Debug
	if fails == 1 || fails%10 == 0 {
		lvl = log.Warn
	}
	lvl("seed dial failed", "seed", addrs[0].String(), "fails", fails, "err", err)
}

// dial dials a, expecting the key *expect when not nil.
func (s *Service) dial(a transport.Addr, expect *proto.PubKey) (*transport.Link, error) {
	ctx, cancel := context.WithTimeout(s.cfg.Context, s.cfg.DialTimeout)
	defer cancel()
	s.host.Count(DialAttempt, 1)
	l, err := transport.Dial(ctx, a, s.link, expect)
	if err != nil {
		s.host.Count(DialFailed, 1)
		return nil, err
	}
	return l, nil
}

// Send queues a frame of type t with payload on pl. A frame that moves
// to the winner of a duplicate pair (Rehomed) goes on the peer's link of
// the moment when pl has closed since it was picked; one that cannot be
// queued is reported to the host (SendFailed), unless pl lost a duplicate
// pair and the frame is one the winner's link-up sends afresh.
func (s *Service) Send(pl *Link, t proto.FrameType, payload []byte) {
	f := make([]byte, 0, 1+len(payload))
	f = append(f, byte(t))
	f = append(f, payload...)
	err := pl.Conn.Send(f)
	if errors.Is(err, transport.ErrClosed) && Rehomed(t) {
		// The link lost a duplicate pair since it was picked (a move to
		// a Unix socket, say): the frames that move to the winner of a
		// pair go on the peer's link now, as in the node's fan-out.
		if cur := s.Linked(pl.Key); cur != nil && cur != pl {
			err = cur.Conn.Send(f)
		}
	}
	if err != nil && !sessionFrameSuperseded(pl, t, err) {
		s.host.SendFailed(pl, t, err)
	}
}

// CloseAsync says goodbye on pl with reason, unless it was said already,
// and closes pl once the goodbye is flushed (200 ms at most), without
// waiting on the caller's goroutine, which may be pl's own reader.
func (s *Service) CloseAsync(pl *Link, reason string) {
	if !pl.SayGoodbye(reason) {
		return // closing already: a goodbye is not answered twice
	}
	s.cfg.Group.Go(func() {
		// Give the writer a moment to flush the goodbye.
		select {
		case <-pl.Conn.Done():
		case <-time.After(200 * time.Millisecond):
		}
		_ = pl.Conn.Close()
	})
}

// Goodbye handles a goodbye frame on pl: a goodbye right after our dial
// counts as a refusal; the link is closed, unless a move to the peer's
// Unix socket is agreed and its link will retire pl (awaitMove).
func (s *Service) Goodbye(pl *Link) {
	if pl.Conn.Outbound() && time.Since(pl.Conn.Established()) < RefusedWithin {
		pl.Refused.Store(true)
	}
	if s.awaitMove(pl) {
		return
	}
	s.CloseAsync(pl, "goodbye")
}
