package peers

import (
	"slices"
	"time"

	"github.com/meshd/meshd/proto"
)

// Incremental peer exchange (PROTOCOL.md §14.4), the frames: the list
// and what each link is told of it are PeerList's; the service builds
// the list from its links, sends the frames and keeps each link's view
// of its peer's list.

// RefreshLocked brings the list up to date with the links held and the
// node's own addresses, adv.
func (s *Service) RefreshLocked(adv []string) {
	want := make(map[proto.PubKey][]string, len(s.ByKey)+1)
	if len(adv) > 0 {
		want[s.host.Self()] = adv
	}
	for k, p := range s.ByKey {
		if p.Link == nil {
			continue
		}
		if ls := GossipAddrs(p.Link.ListenAddrs()); len(ls) > 0 {
			want[k] = ls
		}
	}
	s.List.Refresh(want)
}

// refreshLocked is RefreshLocked with the addresses the node advertises.
func (s *Service) refreshLocked() { s.RefreshLocked(s.Advertised()) }

// sendPeersLocked sends pl the whole list in a peers frame (unless it
// would be empty), and marks the link told up to now.
func (s *Service) sendPeersLocked(pl *Link) {
	list, ok := s.List.WholeFor(pl)
	if !ok {
		return
	}
	b, err := proto.Marshal(&list)
	if err != nil {
		return
	}
	s.sendLocked(pl, proto.FramePeers, b)
}

// sendUpdateLocked sends pl what changed since it was last told, with
// the digest; with always, even when nothing did. A link told nothing
// yet, or told before the oldest removal remembered, gets the whole list
// first. Frames are built and queued under the table's mutex, so that
// those of one link go out in the order of their versions.
func (s *Service) sendUpdateLocked(pl *Link, always, resync bool) {
	if s.List.NeedsWhole(pl) {
		s.sendPeersLocked(pl)
		always = true
	}
	u, ok := s.List.UpdateFor(pl, always, resync)
	if !ok {
		return
	}
	b, err := proto.Marshal(&u)
	if err != nil {
		return
	}
	s.sendLocked(pl, proto.FramePeerUpdate, b)
}

// sendLocked queues a frame of the service's own (peer lists, link
// moves) on pl; the table's mutex may be held. None of them moves to the
// winner of a duplicate pair: the winner's link-up sends them afresh.
func (s *Service) sendLocked(pl *Link, t proto.FrameType, payload []byte) {
	f := make([]byte, 0, 1+len(payload))
	f = append(f, byte(t))
	f = append(f, payload...)
	if err := pl.Conn.Send(f); err != nil && !sessionFrameSuperseded(pl, t, err) {
		s.host.SendFailed(pl, t, err)
	}
}

// ExchangeLinkUp tells a new link the whole list, then a peer-update
// saying that this node speaks them.
func (s *Service) ExchangeLinkUp(pl *Link) {
	s.Lock()
	defer s.Unlock()
	s.refreshLocked()
	s.sendPeersLocked(pl)
	if !s.cfg.Legacy.PeerUpdates {
		s.sendUpdateLocked(pl, true, false)
	}
}

// pxSend runs a round: with periodic, the interval's round (the whole
// list to older peers, the digest to the others); otherwise the changes
// only, to peers that speak peer-update.
func (s *Service) pxSend(links []*Link, periodic bool) {
	s.Lock()
	defer s.Unlock()
	s.refreshLocked()
	for _, pl := range links {
		if s.ByKey[pl.Key] == nil || s.ByKey[pl.Key].Link != pl {
			continue // gone meanwhile
		}
		switch {
		case pl.PX.Speaks.Load() && !s.cfg.Legacy.PeerUpdates:
			s.sendUpdateLocked(pl, periodic, false)
		case periodic:
			s.sendPeersLocked(pl)
		}
	}
}

// HandlePeers takes a peers frame from pl: the link's copy of the
// peer's list becomes the list, and its addresses are taken.
func (s *Service) HandlePeers(pl *Link, payload []byte) {
	list, err := proto.ParsePeerList(payload)
	if err != nil {
		s.host.Count(PeersMalformed, 1)
		s.warnRL("bad peer list", pl.Key.Fingerprint(), "peers.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	if list.IgnoredAddrs > 0 {
		s.host.Count(AddrIgnored, uint64(list.IgnoredAddrs))
	}
	s.viewReplace(pl, list.Peers)
	s.takeAddrs(pl, list.Peers)
}

// HandlePeerUpdate applies a peer-update to the link's copy of the
// peer's list and takes the addresses as a peers frame's are taken.
func (s *Service) HandlePeerUpdate(pl *Link, payload []byte) {
	if s.cfg.Legacy.PeerUpdates {
		s.host.Count(FrameUnknown, 1) // as a node without them
		return
	}
	u, err := proto.ParsePeerUpdate(payload)
	if err != nil {
		s.host.Count(PeersMalformed, 1)
		s.warnRL("bad peer update", pl.Key.Fingerprint(), "peers.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	iv := s.cfg.ExchangeInterval
	pl.PX.Speaks.Store(true)
	s.host.Count(PeersUpdates, 1)
	if u.IgnoredAddrs > 0 {
		s.host.Count(AddrIgnored, uint64(u.IgnoredAddrs))
	}
	if u.Resync {
		s.host.Count(PeersResyncAsked, 1)
		s.Lock()
		if time.Since(pl.PX.AnsweredAt) >= iv {
			pl.PX.AnsweredAt = time.Now()
			pl.PX.Told = false // the whole list, then an update
			s.sendUpdateLocked(pl, true, false)
		}
		s.Unlock()
	}
	pl.PX.ViewMu.Lock()
	for _, k := range u.Removed {
		pl.PX.ViewDel(k)
	}
	limit := s.viewLimit()
	for _, p := range u.Set {
		pl.PX.ViewSet(p, s.Hashes.Get, limit)
	}
	pl.PX.ViewAt = time.Now()
	drift := [proto.PeerDigestSize]byte(u.Digest) != pl.PX.ViewDigest
	pl.PX.ViewMu.Unlock()
	if len(u.Set) > 0 {
		s.takeAddrs(pl, u.Set)
	}
	if !drift {
		return
	}
	s.host.Count(PeersDigestMismatch, 1)
	if !pl.PX.AskedAt.IsZero() && time.Since(pl.PX.AskedAt) < iv {
		return
	}
	pl.PX.AskedAt = time.Now()
	s.Lock()
	s.sendUpdateLocked(pl, true, true)
	s.Unlock()
}

// viewReplace makes the link's copy of the peer's list the whole list
// it just received.
func (s *Service) viewReplace(pl *Link, list []proto.PeerInfo) {
	limit := s.viewLimit()
	pl.PX.ViewMu.Lock()
	defer pl.PX.ViewMu.Unlock()
	pl.PX.View = nil
	pl.PX.ViewDigest = [proto.PeerDigestSize]byte{}
	pl.PX.ViewAt = time.Now()
	for _, p := range list {
		pl.PX.ViewSet(p, s.Hashes.Get, limit)
	}
}

func (s *Service) viewLimit() int { return max(MinPeerView, 2*len(s.host.Roster().Members)) }

// takeAddrs records the addresses of a peers or peer-update frame's
// entries from pl, under the address book's rules.
func (s *Service) takeAddrs(pl *Link, entries []proto.PeerInfo) {
	added, selfChanged := false, false
	ignored := 0
	self := s.host.Self()
	s.Lock()
	for _, p := range entries {
		// Only roster members' addresses are taken (receive step 4).
		if !s.host.Member(p.Key) {
			s.host.Count(PeersIgnoredNotMember, 1)
			continue
		}
		if p.Key.Equal(self) {
			continue
		}
		src := Gossip
		if p.Key.Equal(pl.Key) {
			// The peer's own entry: its claim about itself.
			src = SelfSource(pl.Conn)
			selfChanged = !slices.Equal(pl.ListenAddrs(), p.Addrs)
			pl.SetListen(p.Addrs)
		}
		ign, add := s.MergeAddrsLocked(p.Key, p.Addrs, src)
		ignored += ign
		added = added || add > 0
	}
	s.Unlock()
	if ignored > 0 {
		s.host.Count(AddrIgnored, uint64(ignored))
	}
	if selfChanged {
		s.List.Changed()
	}
	if added {
		s.Wake() // a new address to dial; known ones need no dial round
	}
}
