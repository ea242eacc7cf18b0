package node

import (
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
)

// The links' counters.
var (
	famLinkEvents   = newFamily("meshd_link_events_total", "Link lifecycle events.", "event")
	famLinkRejected = newFamily("meshd_links_rejected_total", "Links closed after the handshake, by reason.", "reason")
	famDials        = newFamily("meshd_dials_total", "Outbound dial attempts.")
	famDialFailures = newFamily("meshd_dial_failures_total", "Outbound dials that failed.")
	famSeedFailures = newFamily("meshd_seed_dial_failures_total", "Dials to static seeds that failed.")
	famDialRefused  = newFamily("meshd_dials_refused_total", "Dials that ended in a refusal (the peer holds us not a member); they back off like failures.")
	famMDNSSeen     = newFamily("meshd_mdns_seen_total", "mDNS announcements seen.")
	famMDNSIgnored  = newFamily("meshd_mdns_ignored_total", "mDNS announcements ignored, by reason.", "reason")
	famPeersIgnored = newFamily("meshd_peer_exchange_ignored_total", "Peer exchange entries or frames ignored, by reason.", "reason")
	famAddrEvicted  = newFamily("meshd_addresses_evicted_total", "Gossiped addresses dropped after failed dials.")
	famAddrIgnored  = newFamily("meshd_addresses_ignored_total", "Listen addresses in handshakes or peer lists that could not be dialled and were skipped.")
	famFrameDropped = newFamily("meshd_frames_send_dropped_total", "Control frames a link refused, by frame type.", "frame")
	famFrameInvalid = newFamily("meshd_frames_invalid_total", "Frames received that were empty or of an unknown type.", "reason")

	cLinkUp                = newCounter("link.up", famLinkEvents, "up")
	cLinkDown              = newCounter("link.down", famLinkEvents, "down")
	cLinkDuplicate         = newCounter("link.duplicate", famLinkEvents, "duplicate")
	cLinkRejectedNotMember = newCounter("link.rejected.not_member", famLinkRejected, "not_member")
	cDialAttempt           = newCounter("dial.attempt", famDials)
	cDialFailed            = newCounter("dial.failed", famDialFailures)
	cDialSeedFailed        = newCounter("dial.seed_failed", famSeedFailures)
	cDialRefused           = newCounter("dial.refused", famDialRefused)
	cMDNSSeen              = newCounter("mdns.seen", famMDNSSeen)
	cMDNSIgnoredVersion    = newCounter("mdns.ignored.protocol_version", famMDNSIgnored, "protocol_version")
	cMDNSIgnoredNotMember  = newCounter("mdns.ignored.not_member", famMDNSIgnored, "not_member")
	cPeersMalformed        = newCounter("peers.malformed", famPeersIgnored, "malformed")
	cPeersIgnoredNotMember = newCounter("peers.ignored.not_member", famPeersIgnored, "not_member")
	cAddrIgnored           = newCounter("addr.ignored", famAddrIgnored)
	cAddrEvicted           = newCounter("addr.evicted", famAddrEvicted)
	cFrameEmpty            = newCounter("frame.empty", famFrameInvalid, "empty")
	cFrameUnknown          = newCounter("frame.unknown", famFrameInvalid, "unknown")
	// cSendDropped counts "send.dropped.<frame>": frames a link refused.
	cSendDropped = newFrameVec("send.dropped.", famFrameDropped)
	// cLinkDownBy counts "link.down.<why>" by [downReason].
	cLinkDownBy = newEventVec[linkDown]("link.down.", linkDownNames[:])
)

func (n *Node) handleFrame(pl *peers.Link, frame []byte) {
	n.own.Table().Touch(pl.Key, time.Now())
	if len(frame) == 0 {
		n.metrics.inc(cFrameEmpty)
		return
	}
	payload := frame[1:]
	n.metrics.frameIn(proto.FrameType(frame[0]), len(frame))
	switch t := proto.FrameType(frame[0]); t {
	case proto.FrameRoster:
		n.roster.HandleFrame(pl, payload)
	case proto.FramePeers:
		n.peers.HandlePeers(pl, payload)
	case proto.FramePeerUpdate:
		n.peers.HandlePeerUpdate(pl, payload)
	case proto.FrameGoodbye:
		n.logRL.log(n.log, "peer said goodbye", pl.Key.Fingerprint(), "goodbye",
			"peer", pl.Key.Fingerprint(), "reason", sanitize(payload))
		n.peers.Goodbye(pl)
	case proto.FrameEnvelope:
		n.rx.Receive(payload, rx.Source{Link: pl})
	case proto.FramePolicy:
		n.chans.HandleFrame(pl, payload)
	case proto.FramePolicyDigest:
		n.chans.HandleDigest(pl, payload)
	case proto.FrameAck:
		n.out.HandleAck(pl, payload)
	case proto.FrameCard:
		n.cards.HandleFrame(pl, payload)
	case proto.FrameLinkMove:
		n.peers.HandleLinkMove(pl, payload)
	case proto.FramePresenceNote:
		n.receivePresenceNote(pl, payload)
	case proto.FrameBlobWant:
		n.attach.handleWant(pl, payload)
	case proto.FrameBlobChunk:
		n.attach.handleChunk(pl, frame)
	default:
		n.metrics.inc(cFrameUnknown)
		n.logRL.debug(n.log, "unhandled frame", pl.Key.Fingerprint(), "frame.unknown", "peer", pl.Key.Fingerprint(), "type", t.String(), "len", len(payload))
	}
}
