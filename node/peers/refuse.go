package peers

import (
	"fmt"
	"path/filepath"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// Refuse is the transport's Refused hook: the node's admission turned a
// peer away at the end of a completed handshake (the rules are in
// refused.go). A knock goes to the host (Knocked). A former member with
// an older roster gets ours, which tells it (verifiably) that it was
// removed; every refused peer gets a goodbye. Only former members get
// the roster: it names every member, and anyone who knows the org id can
// complete a handshake.
func (s *Service) Refuse(l *transport.Link, err error) {
	p := l.Peer()
	self := s.host.Self()
	if p.Knock && !p.Identity.Equal(self) {
		s.host.Knocked(l)
		return
	}
	if p.Identity.Equal(self) {
		_ = l.Send(GoodbyeFrame("this is the node itself"))
		return
	}
	r := s.host.Roster()
	if p.RosterVersion < r.Version && s.Former.Has(p.Identity) {
		if b, eerr := r.Encode(); eerr == nil {
			s.host.Count(RosterPushedRefused, 1)
			_ = l.Send(append([]byte{byte(proto.FrameRoster)}, b...))
		}
	}
	_ = l.Send(GoodbyeFrame(fmt.Sprintf("not a member of roster %q v%d", r.Org, r.Version)))
	s.infoRL("handshake refused", p.Identity.Fingerprint(), "not_member",
		"peer", p.Identity.Fingerprint(), "remote", l.RemoteAddr(), "peer_roster", p.RosterVersion,
		"roster", r.Version, "err", err)
}

// RemovedSelf reports whether this node applied a roster update that
// removed it, and is not in its current roster.
func (s *Service) RemovedSelf() bool {
	self := s.host.Self()
	return !s.host.Member(self) && s.Former.Has(self)
}

// LoadFormer reads the former members file of the home dir; a missing
// or damaged one leaves the set empty (it only decides whom we tell).
func (s *Service) LoadFormer(dir string) {
	var err error
	s.Former, err = LoadFormerMembers(filepath.Join(dir, FormerMembersFile))
	if err != nil {
		s.cfg.Log.Warn("read former members", "err", err)
	}
}

// NoteRemoved remembers the members of cur that next drops.
func (s *Service) NoteRemoved(cur, next *roster.Roster) {
	if err := s.Former.NoteRemoved(cur, next); err != nil {
		s.cfg.Log.Warn("write former members", "err", err)
	}
}

// FormerMemberError is the node's refusal at admission of a peer that a
// roster update this node applied removed. A seed dial that meets it is
// dropped.
type FormerMemberError struct {
	Key proto.PubKey
	Err error
}

func (e *FormerMemberError) Error() string { return e.Err.Error() }
func (e *FormerMemberError) Unwrap() error { return e.Err }
