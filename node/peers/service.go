package peers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/logrl"
	"github.com/meshd/meshd/transport/mdns"
)

// Service is connection management as the node holds it: the peer table,
// the admission of links into it (the duplicate-link rule and the
// retirement of a pair's loser), and the loops that fill it (accept,
// dial, discovery, peer exchange), calling the node through Host.
type Service struct {
	*Table
	host Host
	cfg  ServiceConfig
	rl   *logrl.Limiter
	kick chan struct{} // wakes the dial loop

	// advertised holds our listen addresses as peers should dial them
	// (Advertise): set once every listener is bound. The listeners serve
	// handshakes before that: the handshake waits for advertisedSet,
	// closed once it is set.
	advertised    atomic.Pointer[[]string]
	advertisedSet chan struct{}

	// Set before Start (listeners.go) or by it, before any link exists;
	// read-only after.
	link   transport.Config // the settings of the node's links, dialled and accepted
	unixLn bool             // the node accepts links on a Unix socket
	lns    []*transport.Listener
	disc   mdns.Discovery
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
	// DialTimeout bounds one dial, handshake included.
	DialTimeout time.Duration
	// ExchangeInterval is the period of the peer-exchange round
	// (PROTOCOL.md §14.4).
	ExchangeInterval time.Duration
	// SeedsFile is the seeds file 'meshctl join' wrote, and OwnSocket
	// the node's own Unix link socket, which it never dials.
	SeedsFile, OwnSocket string
	// RateLog limits the repetitive lines (bad frames), shared with the
	// node's so that one budget bounds them all; nil: a limiter of the
	// service's own.
	RateLog *logrl.Limiter
	// Legacy makes the service behave as nodes of before a protocol
	// addition (tests of interoperation).
	Legacy Legacy
}

// Legacy names protocol additions a node may behave as if it had not.
type Legacy struct {
	// PeerUpdates: whole peer lists only, no peer-update frames.
	PeerUpdates bool
	// LinkMoves: never ask to move a link to a Unix socket.
	LinkMoves bool
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
	rl := c.RateLog
	if rl == nil {
		rl = logrl.New(0, 0)
	}
	return &Service{Table: NewTable(), host: h, cfg: c, rl: rl, kick: make(chan struct{}, 1),
		advertisedSet: make(chan struct{})}
}

// Start runs connection management: an accept loop on each listener
// (AddListener), the dial loop dialling with the link settings
// (SetLinkConfig), discovery's loop when there is discovery
// (SetDiscovery), and the peer-exchange loop. Each goroutine joins the
// service's group and ends with its context.
func (s *Service) Start() {
	for _, ln := range s.lns {
		if ln.Addr().Network == "unix" {
			s.unixLn = true
		}
	}
	for _, ln := range s.lns {
		s.cfg.Group.Go(func() { s.Accept(ln) })
	}
	s.cfg.Group.Go(s.dialLoop)
	if s.disc != nil {
		s.cfg.Group.Go(s.discoveryLoop)
	}
	s.cfg.Group.Go(s.exchangeLoop)
}

// SetAdvertised records our listen addresses as peers should dial them,
// once: the handshakes waiting for them go on (AdvertisedSet).
func (s *Service) SetAdvertised(adv []string) {
	s.advertised.Store(&adv)
	close(s.advertisedSet)
}

// Advertised returns our listen addresses as peers should dial them:
// none until SetAdvertised. The slice is not to be modified.
func (s *Service) Advertised() []string {
	if p := s.advertised.Load(); p != nil {
		return *p
	}
	return nil
}

// AdvertisedSet is closed once SetAdvertised has run.
func (s *Service) AdvertisedSet() <-chan struct{} { return s.advertisedSet }

// Wake makes the dial loop look at once: an address came, a link went
// down, a dial ended.
func (s *Service) Wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// warnRL writes a warning unless one of (peer, reason) was written
// lately (see transport/logrl).
func (s *Service) warnRL(msg, peer, reason string, args ...any) {
	s.logRL(slog.LevelWarn, msg, peer, reason, args...)
}

// infoRL is warnRL at Info level.
func (s *Service) infoRL(msg, peer, reason string, args ...any) {
	s.logRL(slog.LevelInfo, msg, peer, reason, args...)
}

func (s *Service) logRL(lvl slog.Level, msg, peer, reason string, args ...any) {
	if !s.cfg.Log.Enabled(context.Background(), lvl) {
		return
	}
	ok, suppressed := s.rl.Allow(peer+"|"+reason, time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.cfg.Log.Log(context.Background(), lvl, msg, args...)
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
	if l.Network() == "tcp" {
		s.Wake() // a move to the peer's Unix socket may be due (move.go)
	}
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
	if !closing {
		s.Wake()
	}
}

// Backoff returns the redial delay after fails consecutive failures,
// between the configured bounds.
func (s *Service) Backoff(fails int) time.Duration {
	return Backoff(s.cfg.BackoffMin, s.cfg.BackoffMax, fails)
}
