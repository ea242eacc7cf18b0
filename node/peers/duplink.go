package peers

import (
	"bytes"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The duplicate-link rule (PROTOCOL.md §14.2): each peer pair keeps one
// link, and both ends pick the same one without a word. A peer process
// keeps one Noise static key for its lifetime, so links that show
// different static keys come from different processes: the peer
// restarted, the registered link is a leftover its previous process
// could not close, and the new link wins (the node checks that, and a
// move to a Unix socket both ends agreed to, before TieBreak).

// TieBreak decides which of two links to the same peer process survives,
// alike at both ends: the link dialled by the lower NodeID wins, and two
// links in the same direction (a race of one dialler) keep the one with
// the lower Noise session id (the handshake hash), which both ends
// share. self is this node's NodeID.
func TieBreak(self proto.NodeID, a, b *transport.Link) *transport.Link {
	if a.Outbound() != b.Outbound() {
		selfLower := self.Less(a.PeerKey().NodeID())
		if a.Outbound() == selfLower {
			return a
		}
		return b
	}
	sa, sb := a.SessionID(), b.SessionID()
	if bytes.Compare(sa[:], sb[:]) <= 0 {
		return a
	}
	return b
}

// SameProcess reports whether two links to one peer show the same Noise
// static key, and so come from the same peer process.
func SameProcess(a, b *transport.Link) bool {
	return bytes.Equal(a.PeerStatic(), b.PeerStatic())
}

// Rehomed reports whether a frame of type t queued on the loser of a
// duplicate pair goes on the winner: frames about the mesh's content
// (envelopes, acks, rosters, policies), which the receiver takes from
// any link and dedupes. Frames about the link's own session (the
// goodbye, peer lists and their updates, the policy digest) do not: the
// winner's link-up sends them afresh.
func Rehomed(t proto.FrameType) bool {
	switch t {
	case proto.FrameEnvelope, proto.FrameAck, proto.FrameRoster, proto.FramePolicy:
		return true
	}
	return false
}

// CarryClaims keeps what the peer said of itself on the link it replaces
// (its name and listen addresses) when the new link l is one this node
// dialled to the same peer process: a responder's handshake payload
// carries neither (PROTOCOL.md §12.2), so a link moved to the peer's Unix
// socket, or won by this node's dial, would otherwise lose them. p is
// l's payload; it returns the payload to keep.
func CarryClaims(p *proto.HandshakePayload, l *transport.Link, old *Link) *proto.HandshakePayload {
	if old.Payload == nil || p.Name != "" || len(p.Listen) > 0 || !l.Outbound() || !SameProcess(old.Conn, l) {
		return p
	}
	cp := *p
	cp.Name, cp.Listen = old.Payload.Name, old.Payload.Listen
	return &cp
}
