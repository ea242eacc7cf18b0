package node

import (
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The counters of link admission, counted as node/peers reports it.
var (
	famRehomed = newFamily("meshd_link_frames_rehomed_total", "Frames still queued on the losing link of a duplicate pair that were sent on the winner instead.")

	cLinkRehomedFrames = newCounter("link.rehomed_frames", famRehomed)
)

// peerHost is the node as node/peers sees it: the peers.Host and
// peers.Dialer that connection management calls. A conversion of
// *Node, so that these methods are not the node's own API.
type peerHost Node

var (
	_ peers.Host   = (*peerHost)(nil)
	_ peers.Dialer = (*peerHost)(nil)
)

// newPeerService returns n's connection management, calling n.
func newPeerService(n *Node) *peers.Service {
	return peers.NewService((*peerHost)(n), peers.ServiceConfig{
		Context:    n.ctx,
		Group:      &n.wg,
		Log:        n.log,
		BackoffMin: n.cfg.DialBackoffMin,
		BackoffMax: n.cfg.DialBackoffMax,
	})
}

// Self is the node's identity key.
func (h *peerHost) Self() proto.PubKey { return h.id.Pub }

// Member reports whether k is in the current roster.
func (h *peerHost) Member(k proto.PubKey) bool {
	_, ok := (*Node)(h).Roster().Member(k)
	return ok
}

// Frame hands a frame to the node's dispatch.
func (h *peerHost) Frame(pl *peers.Link, frame []byte) { (*Node)(h).handleFrame(pl, frame) }

// LinkUp counts and logs a registered link, then pushes our roster if
// it is newer, and shares what the peer should know from us.
func (h *peerHost) LinkUp(u peers.Up) {
	n := (*Node)(h)
	pl, l := u.Link, u.Link.Conn
	if u.IgnoredAddrs > 0 {
		n.metrics.add(cAddrIgnored, uint64(u.IgnoredAddrs))
	}
	if u.Replaced {
		n.metrics.inc(cLinkDuplicate)
	}
	n.metrics.inc(cLinkUp)
	if l.Network() == "tcp" {
		n.wake() // a move to the peer's Unix socket may be due (unixmove.go)
	}
	dir := "inbound"
	if l.Outbound() {
		dir = "outbound"
	}
	n.log.Info("link up", "peer", pl.Key.Fingerprint(), "name", pl.Payload.Name, "addr", l.RemoteAddr(),
		"network", l.Network(), "dir", dir, "peer_roster", pl.Payload.RosterVersion)

	r := n.Roster()
	if r.Version > pl.Payload.RosterVersion {
		n.pushRoster(pl, r)
	}
	n.pxLinkUp(pl)
	n.sendPolicyDigest(pl)
	n.own.SendTo(pl)
	n.cards.SendAll(pl)
	n.flushQueue(pl)
	n.syncer.OnLinkUp(pl)
	n.attach.onLinkUp()
}

// LinkDown counts and logs a link that went down, and wakes the
// dialler.
func (h *peerHost) LinkDown(d peers.Down) {
	n := (*Node)(h)
	pl := d.Link
	if d.Refused {
		n.metrics.inc(cDialRefused)
	}
	h.linkClosed(pl)
	n.metrics.inc(cLinkDown)
	n.metrics.inc(cLinkDownBy.at(downReason(pl.Conn.Err())))
	if !d.Closing {
		n.log.Info("link down", "peer", pl.Key.Fingerprint(), "name", pl.Payload.Name, "reason", errString(pl.Conn.Err()))
		n.wake()
	}
}

// Rejected counts a link closed at admission.
func (h *peerHost) Rejected(l *transport.Link, r peers.Rejection) {
	n := (*Node)(h)
	switch r {
	case peers.NotMember:
		n.metrics.inc(cLinkRejectedNotMember)
	case peers.Duplicate:
		n.metrics.inc(cLinkDuplicate)
		n.log.Debug("duplicate link closed", "peer", l.PeerKey().Fingerprint(), "addr", l.RemoteAddr())
	}
}

// Rehomed counts the frames of a duplicate pair's loser sent on the
// winner, and those the winner refused.
func (h *peerHost) Rehomed(loser *peers.Link, moved int, dropped []proto.FrameType) {
	n := (*Node)(h)
	for _, t := range dropped {
		n.metrics.inc(cSendDropped.of(t))
	}
	if moved > 0 {
		n.metrics.add(cLinkRehomedFrames, uint64(moved))
	}
	n.log.Debug("frames of the losing duplicate link moved to the winner",
		"peer", loser.Key.Fingerprint(), "moved", moved, "dropped", len(dropped))
}
