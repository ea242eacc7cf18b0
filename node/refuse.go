package node

import (
	"fmt"
	"path/filepath"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famRosterRefused = newFamily("meshd_roster_pushes_refused_total", "Rosters sent to a refused former member before the goodbye, so it learns of its removal.")

	cRosterPushedRefused = newCounter("roster.pushed_refused", famRosterRefused)
)

// Refusals (the rules are in peers/refused.go): the refusing responder
// tells the peer why on the completed session ([Node.refuse]): a former
// member gets the current signed roster, which it verifies and applies
// like any roster update, and so learns it was removed; everyone gets a
// goodbye. The dialler backs off (peers.Service.removeLink, dialPeer).

// removedSelf reports whether this node applied a roster update that
// removed it, and is not in its current roster.
func (n *Node) removedSelf() bool {
	return !n.isMember() && n.wasMember(n.id.Pub)
}

// isMember reports whether this node is in its current roster.
func (n *Node) isMember() bool {
	_, ok := n.Roster().Member(n.id.Pub)
	return ok
}

// refuse is the transport's Refused hook: Admit turned a peer away at the
// end of a completed handshake. A former member with an older roster gets
// ours, which tells it (verifiably) that it was removed; every refused
// peer gets a goodbye. Only former members get the roster: it names every
// member, and anyone who knows the org id can complete a handshake.
func (n *Node) refuse(l *transport.Link, err error) {
	p := l.Peer()
	r := n.Roster()
	if p.Knock && !p.Identity.Equal(n.id.Pub) {
		n.answerKnockRefused(l)
		return
	}
	if p.Identity.Equal(n.id.Pub) {
		_ = l.Send(peers.GoodbyeFrame("this is the node itself"))
		return
	}
	if p.RosterVersion < r.Version && n.wasMember(p.Identity) {
		if b, eerr := r.Encode(); eerr == nil {
			n.metrics.inc(cRosterPushedRefused)
			_ = l.Send(append([]byte{byte(proto.FrameRoster)}, b...))
		}
	}
	_ = l.Send(peers.GoodbyeFrame(fmt.Sprintf("not a member of roster %q v%d", r.Org, r.Version)))
	n.logRL.log(n.log, "handshake refused", p.Identity.Fingerprint(), "not_member",
		"peer", p.Identity.Fingerprint(), "remote", l.RemoteAddr(), "peer_roster", p.RosterVersion,
		"roster", r.Version, "err", err)
}

// wasMember reports whether k was removed from the roster by an update
// this node applied.
func (n *Node) wasMember(k proto.PubKey) bool {
	return n.peers.Former.Has(k)
}

// loadFormerMembers reads the former members file; a missing or damaged
// one leaves the set empty (it only decides whom we tell).
func (n *Node) loadFormerMembers() {
	var err error
	n.peers.Former, err = peers.LoadFormerMembers(filepath.Join(n.home.Dir, peers.FormerMembersFile))
	if err != nil {
		n.log.Warn("read former members", "err", err)
	}
}

// noteRemoved remembers the members of cur that next drops.
func (n *Node) noteRemoved(cur, next *roster.Roster) {
	if err := n.peers.Former.NoteRemoved(cur, next); err != nil {
		n.log.Warn("write former members", "err", err)
	}
}
