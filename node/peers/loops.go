package peers

import (
	"time"

	"github.com/meshd/meshd/internal/clockgrid"
	"github.com/meshd/meshd/proto"
)

// dialLoop dials whoever is due (DueLocked), sleeping until the next
// one is due or Wake is called.
func (s *Service) dialLoop() {
	ctx := s.cfg.Context
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		// Sleep until the next dial is due, or something changes. With
		// nothing due, the idle check falls on a whole second of the
		// clock, with the node's other idle timers (internal/clockgrid).
		now := time.Now()
		wait := min(max(s.dialDue().Sub(now), 10*time.Millisecond), DialIdleWait)
		if wait == DialIdleWait {
			wait = clockgrid.Wait(now, wait, time.Second)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// dialDue starts a dial of every member and seed that is due (see
// Table.DueLocked) and returns when the next one is due.
func (s *Service) dialDue() time.Time {
	s.Lock()
	defer s.Unlock()
	return s.DueLocked(time.Now(), s.host.Self().NodeID(), len(s.host.Roster().Members), s)
}

// discoveryLoop takes the addresses of the members mDNS finds; a node
// of another org goes to the host (doctor, knocks).
func (s *Service) discoveryLoop() {
	ctx := s.cfg.Context
	ch := s.disc.Peers()
	for {
		select {
		case <-ctx.Done():
			return
		case p, ok := <-ch:
			if !ok {
				return
			}
			self := s.host.Self()
			if p.Org != s.link.Org {
				s.host.OtherOrg(OtherOrg{MDNS: &p})
				continue
			}
			if p.Key.Equal(self) {
				continue
			}
			if p.ProtoVersion != proto.ProtocolVersion {
				s.host.Count(MDNSIgnoredVersion, 1)
				continue
			}
			s.Lock()
			member := s.host.Member(p.Key)
			ignored := 0
			if member {
				ignored, _ = s.MergeAddrsLocked(p.Key, p.Addrs, Gossip)
			}
			s.Unlock()
			if ignored > 0 {
				s.host.Count(AddrIgnored, uint64(ignored))
			}
			if !member {
				s.host.Count(MDNSIgnoredNotMember, 1)
				s.cfg.Log.Debug("mdns peer not in roster", "peer", p.Key.Fingerprint())
				continue
			}
			s.host.Count(MDNSSeen, 1)
			s.Wake()
		}
	}
}

// exchangeLoop sends the peer list's changes, batched (BatchFor), and
// every ExchangeInterval the round: digests or whole lists (pxSend),
// then each link's unacknowledged frames again (Host.Resend).
func (s *Service) exchangeLoop() {
	ctx := s.cfg.Context
	// Rounds fall on multiples of the interval on the clock, so that the
	// digests a node receives from all its peers arrive together: one
	// wake-up, not one per peer (see transport's keepaliveGrid).
	iv := s.cfg.ExchangeInterval
	t := time.NewTimer(clockgrid.Next(time.Now(), iv))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.List.Dirty:
			// Let changes gather, then send them (exchange.go).
			select {
			case <-ctx.Done():
				return
			case <-time.After(BatchFor(s.LinkCount())):
			}
			s.pxSend(s.Links(), false)
		case <-t.C:
			t.Reset(clockgrid.Next(time.Now(), iv))
			links := s.Links()
			s.pxSend(links, true)
			for _, pl := range links {
				s.host.Resend(pl) // re-send what the peer has not acknowledged
			}
		}
	}
}
