package node

import (
	"path/filepath"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The counters of connection management, counted as node/peers reports
// them (peers.Counter); the links' own are in links.go.
var (
	famRehomed       = newFamily("meshd_link_frames_rehomed_total", "Frames still queued on the losing link of a duplicate pair that were sent on the winner instead.")
	famLinkMoves     = newFamily("meshd_link_moves_total", "Steps of moving a TCP link to a same-host peer's Unix socket, by step.", "step")
	famSeedsSkipped  = newFamily("meshd_seeds_skipped_total", "Static seeds not dialled: a seeds-file Unix socket not on this host, or a seed that reached a removed member.", "reason")
	famRosterRefused = newFamily("meshd_roster_pushes_refused_total", "Rosters sent to a refused former member before the goodbye, so it learns of its removal.")

	cLinkRehomedFrames = newCounter("link.rehomed_frames", famRehomed)

	// peerCounters are the counters of the peers.Counter events.
	peerCounters = [peers.NumCounters]counter{
		peers.DialAttempt:               cDialAttempt,
		peers.DialFailed:                cDialFailed,
		peers.DialSeedFailed:            cDialSeedFailed,
		peers.AddrEvicted:               cAddrEvicted,
		peers.AddrIgnored:               cAddrIgnored,
		peers.MDNSSeen:                  cMDNSSeen,
		peers.MDNSIgnoredVersion:        cMDNSIgnoredVersion,
		peers.MDNSIgnoredNotMember:      cMDNSIgnoredNotMember,
		peers.PeersMalformed:            cPeersMalformed,
		peers.PeersIgnoredNotMember:     cPeersIgnoredNotMember,
		peers.PeersUpdates:              newEvent("peers.updates"),
		peers.PeersResyncAsked:          newEvent("peers.resync_asked"),
		peers.PeersDigestMismatch:       newEvent("peers.digest_mismatch"),
		peers.LinkMoveAsked:             newCounter("link.move.asked", famLinkMoves, "asked"),
		peers.LinkMoveMalformed:         newCounter("link.move.malformed", famLinkMoves, "malformed"),
		peers.LinkMoveIgnored:           newCounter("link.move.ignored", famLinkMoves, "ignored"),
		peers.LinkMoveAgreed:            newCounter("link.move.agreed", famLinkMoves, "agreed"),
		peers.LinkMoved:                 newCounter("link.moved", famLinkEvents, "moved_unix"),
		peers.LinkMoveFailed:            newCounter("link.move.failed", famLinkMoves, "failed"),
		peers.LinkMoveLate:              newCounter("link.move.late", famLinkMoves, "late"),
		peers.SeedsSkippedUnixNotLocal:  newCounter("seeds.skipped.unix_not_local", famSeedsSkipped, "unix_not_local"),
		peers.SeedsSkippedRemovedMember: newCounter("seeds.skipped.removed_member", famSeedsSkipped, "removed_member"),
		peers.RosterPushedRefused:       newCounter("roster.pushed_refused", famRosterRefused),
		peers.FrameUnknown:              cFrameUnknown,
	}
)

// peerHost is the node as node/peers sees it: the peers.Host that
// connection management calls. A conversion of *Node, so that these
// methods are not the node's own API.
type peerHost Node

var _ peers.Host = (*peerHost)(nil)

// newPeerService returns n's connection management, calling n; legacy
// (tests) makes it behave as older nodes.
func newPeerService(n *Node, legacy peers.Legacy) *peers.Service {
	return peers.NewService((*peerHost)(n), peers.ServiceConfig{
		Context:          n.life.ctx,
		Group:            &n.life.wg,
		Log:              n.log,
		BackoffMin:       n.cfg.DialBackoffMin,
		BackoffMax:       n.cfg.DialBackoffMax,
		DialTimeout:      n.cfg.DialTimeout,
		ExchangeInterval: n.cfg.PeerExchangeInterval,
		SeedsFile:        filepath.Join(n.cfg.Home, seedsFile),
		OwnSocket:        n.home.LinkSocket(),
		RateLog:          n.logRL.l,
		Legacy:           legacy,
	})
}

// Self is the node's identity key.
func (h *peerHost) Self() proto.PubKey { return h.id.Pub }

// Member reports whether k is in the current roster.
func (h *peerHost) Member(k proto.PubKey) bool {
	_, ok := (*Node)(h).Roster().Member(k)
	return ok
}

// Roster is the current roster.
func (h *peerHost) Roster() *roster.Roster { return (*Node)(h).Roster() }

// Frame hands a frame to the node's dispatch.
func (h *peerHost) Frame(pl *peers.Link, frame []byte) { (*Node)(h).handleFrame(pl, frame) }

// Count counts a connection-management event.
func (h *peerHost) Count(c peers.Counter, d uint64) { h.metrics.add(peerCounters[c], d) }

// SendFailed counts and logs a frame a link refused.
func (h *peerHost) SendFailed(pl *peers.Link, t proto.FrameType, err error) {
	h.metrics.inc(cSendDropped.of(t))
	h.log.Debug("send failed", "peer", pl.Key.Fingerprint(), "frame", t.String(), "err", err)
}

// Resend re-sends what pl's peer has not acknowledged.
func (h *peerHost) Resend(pl *peers.Link) { h.out.FlushQueue(pl) }

// OtherOrg notes a node of another org for meshctl doctor, and knocks
// there (node/join).
func (h *peerHost) OtherOrg(o peers.OtherOrg) {
	n := (*Node)(h)
	if p := o.MDNS; p != nil {
		n.doctor.SawForeignOrg(p.Org, p.Key)
		if !p.Key.Equal(n.id.Pub) && p.ProtoVersion == proto.ProtocolVersion {
			n.join.KnockMDNS(p.Addrs)
		}
		return
	}
	n.join.KnockSeed(o.Seed)
}

// Knocked answers a knock the transport refused.
func (h *peerHost) Knocked(l *transport.Link) { h.join.AnswerRefused(l) }

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
	dir := "inbound"
	if l.Outbound() {
		dir = "outbound"
	}
	n.log.Info("link up", "peer", pl.Key.Fingerprint(), "name", pl.Payload.Name, "addr", l.RemoteAddr(),
		"network", l.Network(), "dir", dir, "peer_roster", pl.Payload.RosterVersion)

	r := n.Roster()
	if r.Version > pl.Payload.RosterVersion {
		n.roster.Push(pl, r)
	}
	n.peers.ExchangeLinkUp(pl)
	n.chans.SendDigest(pl)
	n.own.SendTo(pl)
	n.cards.SendAll(pl)
	n.out.FlushQueue(pl)
	n.rx.Sync.OnLinkUp(pl)
	n.attach.onLinkUp()
}

// LinkDown counts and logs a link that went down (the service then
// wakes its dialler).
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
