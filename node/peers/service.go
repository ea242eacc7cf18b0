package peers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Service is connection management as the node holds it: the peer table
// and the admission of links into it (the duplicate-link rule and the
// retirement of a pair's loser), calling the node through Host.
type Service struct {
	*Table
	host Host
	cfg  ServiceConfig
}

// ServiceConfig is what a Service needs besides its host.
type ServiceConfig struct {
	// Context ends the goroutines the service starts (a retirement's
	// wait) and the accept loops.
	Context context.Context
	// Group is joined by every goroutine the service starts, so that the
	// node's Close waits for them.
	Group *sync.WaitGroup
	// Log gets the service's own lines (a failing listener).
	Log *slog.Logger
	// BackoffMin and BackoffMax bound the redial delay (Backoff).
	BackoffMin, BackoffMax time.Duration
}

// NewService returns a service with an empty table calling h.
func NewService(h Host, c ServiceConfig) *Service {
	if c.Context == nil {
		c.Context = context.Background()
	}
	if c.Group == nil {
		c.Group = new(sync.WaitGroup)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{Table: NewTable(), host: h, cfg: c}
}

// Accept admits each link ln accepts (AddLink), until the service's
// context is done or ln is closed. Failed handshakes are logged and
// counted by the transport; an error here is the listener itself
// failing: it is logged, and accepting resumes after 100 ms.
func (s *Service) Accept(ln *transport.Listener) {
	ctx := s.cfg.Context
	for {
		l, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return
			}
			s.cfg.Log.Warn("accept", "addr", ln.Addr().String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		s.AddLink(l)
	}
}

// MergeAddrsLocked records addresses member key says (src Self…) or
// another peer says of it (Gossip), under the address book's rules; the
// node's own key and non-members are skipped. It returns how many
// addresses were ignored and how many were new.
func (s *Service) MergeAddrsLocked(key proto.PubKey, addrs []string, src Source) (ignored, added int) {
	if key.Equal(s.host.Self()) || !s.host.Member(key) {
		return 0, 0
	}
	return s.MemberLocked(key).Addrs.Merge(addrs, src, time.Now())
}

// AddLink registers an admitted link, resolving duplicates so that each
// peer pair keeps exactly one link, and starts serving it.
func (s *Service) AddLink(l *transport.Link) {
	if !s.host.Admit(l) {
		return
	}
	key := l.PeerKey()
	pl := NewLink(l)
	s.Lock()
	if s.Closed {
		s.Unlock()
		_ = l.Close()
		return
	}
	if !s.host.Member(key) {
		// The roster changed between the handshake and now.
		s.Unlock()
		s.host.Rejected(l, NotMember)
		_ = l.Send(GoodbyeFrame("not a member of the current roster"))
		_ = l.Close()
		return
	}
	var deferred *Link
	replaced := false
	p := s.MemberLocked(key)
	if old := p.Link; old != nil {
		keep, moved := s.preferLinkLocked(p, old.Conn, l)
		if keep == old.Conn {
			s.Unlock()
			s.host.Rejected(l, Duplicate)
			s.retireNewLoser(pl)
			return
		}
		replaced = true
		pl.Payload = CarryClaims(pl.Payload, l, old)
		if moved && l.Outbound() {
			deferred = old // retired once the peer has taken l (see frameHandler)
		} else {
			s.retireLoser(old, pl) // before pl is published: its frames go first
		}
	}
	p.Link = pl
	p.Fails = 0
	p.Spread = true // linked: later dials are redials
	for _, sd := range s.Seeds {
		if !sd.Dialing && sd.Key.Equal(key) {
			sd.Fails = 0
		}
	}
	ignored, _ := s.MergeAddrsLocked(key, pl.Payload.Listen, SelfSource(l))
	s.Unlock()
	s.List.Changed()

	l.Start(s.frameHandler(pl, deferred))
	s.cfg.Group.Go(func() {
		<-l.Done()
		s.removeLink(pl)
	})
	s.host.LinkUp(Up{Link: pl, Replaced: replaced, IgnoredAddrs: pl.Payload.IgnoredListen + ignored})
}

// preferLinkLocked decides which of two links to the same peer
// survives, old being the registered one (the rule is in duplink.go): a
// link from a new peer process wins; then a Unix link both ends agreed
// to move to wins over the TCP link (MovedLocked); then TieBreak. moved
// says the move agreement decided.
func (s *Service) preferLinkLocked(p *Peer, old, l *transport.Link) (keep *transport.Link, moved bool) {
	if !SameProcess(old, l) {
		return l, false
	}
	if keepNew, ok := MovedLocked(p, old.Network(), l.Network(), time.Now()); ok {
		if keepNew {
			return l, true
		}
		return old, true
	}
	return TieBreak(s.host.Self().NodeID(), old, l), false
}

// removeLink tells the table that pl went down, then the host.
func (s *Service) removeLink(pl *Link) {
	// Under the mutex, as roster updates swap the roster: the member
	// check agrees with the table.
	s.Lock()
	self := s.host.Self()
	selfMember := s.host.Member(self)
	down := LinkDown{
		Refused: pl.Refused.Load() || !selfMember || SilentlyRefused(pl.Conn),
		Removed: !selfMember && s.Former.Has(self),
		Member:  s.host.Member(pl.Key),
		Redial:  s.Backoff(0),
	}
	refused := s.LinkDownLocked(pl, down, time.Now())
	closing := s.Closed
	s.Unlock()
	s.List.Changed()
	s.host.LinkDown(Down{Link: pl, Refused: refused, Closing: closing})
}

// Backoff returns the redial delay after fails consecutive failures,
// between the configured bounds.
func (s *Service) Backoff(fails int) time.Duration {
	return Backoff(s.cfg.BackoffMin, s.cfg.BackoffMax, fails)
}
