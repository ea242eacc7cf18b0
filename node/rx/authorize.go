package rx

import (
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// authorize applies the role and ACL rules; it returns a drop reason or
// DropNone.
func (p *Pipeline) authorize(r *roster.Roster, role roster.Role, se *proto.SignedEnvelope) Drop {
	switch se.To.Kind {
	case proto.DestOrg:
		if se.To.Org != r.Org {
			return DropWrongOrg
		}
		if se.Kind != proto.KindPresence {
			return DropUnsupported
		}
		return DropNone
	case proto.DestPeer:
		if !se.To.Peer.Equal(p.cfg.Self) && !ownPreviousKey(r, p.cfg.Self, se.To.Peer) {
			return DropMisrouted
		}
		if se.From.Equal(p.cfg.Self) {
			// Addressed by this node to itself: a subagent result, which
			// never leaves it. A copy from a link is a replay.
			return DropLocalOnly
		}
	case proto.DestChannel:
		if se.Kind != proto.KindMessage {
			return DropUnsupported
		}
		pol, ok := p.cfg.Chans.Set().ByID(se.To.Channel)
		if !ok {
			return DropUnknownChannel
		}
		if role == roster.RoleObserver {
			return DropObserverWrite
		}
		if !pol.CanWrite(r, se.From) {
			return DropNotWriter
		}
		if !pol.CanRead(r, p.cfg.Self) {
			return DropNotReader
		}
		return DropNone
	}
	// Peer-addressed kinds.
	switch se.Kind {
	case proto.KindMessage:
		if role == roster.RoleObserver {
			return DropObserverWrite
		}
	case proto.KindResponse:
		if role == roster.RoleObserver {
			return DropObserverWrite
		}
		if p.unsolicited(r, se) {
			return DropUnsolicitedResponse
		}
	case proto.KindRequest:
		if !role.AtLeast(roster.RoleOperator) {
			return DropRoleTooLow
		}
		if se.Request.Hop > proto.MaxHop {
			return DropHopLimit
		}
	case proto.KindHistoryRequest, proto.KindHistoryResponse:
		return syncDrops[p.Sync.Authorize(se)]
	default:
		return DropUnsupported
	}
	return DropNone
}

// unsolicited reports whether se, a Response, answers no Request this node
// sent to se.From: the node keeps the recipient of each Request it sent
// (as long as its delivery record), and a Response from anyone else, who
// learned or guessed the request id, is dropped (PROTOCOL §15 step 5).
func (p *Pipeline) unsolicited(r *roster.Roster, se *proto.SignedEnvelope) bool {
	peer, ok, err := p.cfg.Store.RequestRecipient(se.Response.RequestID)
	if err != nil {
		p.log.Warn("outgoing request lookup", "request_id", se.Response.RequestID, "err", err)
		return true
	}
	return !ok || !(peer.Equal(se.From) || sameMember(r, peer, se.From))
}

// MaxTTL is the longest ttl_secs this node accepts: its dedupe horizon,
// history.Config.SeenMaxAge (144 h), which the store counts from the
// envelope's ts. An envelope that lived longer could arrive again, live,
// after its (from, id) was forgotten, and be delivered twice
// (docs/PROTOCOL.md §15; docs/SECURITY.md "Envelope ids and per-sender
// budgets").
const MaxTTL = 144 * 3600

// TTLWithinHorizon reports whether se expires before its dedupe entry is
// forgotten: ts + ttl ≤ ts + horizon. The store forgets an entry once ts
// is older than the horizon, and a live copy is refused once ts + ttl has
// passed, so no copy is ever both unexpired and forgotten.
func TTLWithinHorizon(se *proto.SignedEnvelope) bool { return se.TTL <= MaxTTL }

// The rules of a key rotation the pipeline applies (the rotation itself
// is node/rostergossip's).

// senderRefusal names why the roster refuses k as a sender: a previous key
// past its window, or a stranger.
func senderRefusal(r *roster.Roster, k proto.PubKey) Drop {
	if _, ok := r.Previous(k); ok {
		return DropRetiredKey
	}
	return DropNotMember
}

// ownPreviousKey reports whether k is the previous key in r of self, this
// node's key: an envelope addressed to it (sent before the sender learnt
// of the rotation) is for this node.
func ownPreviousKey(r *roster.Roster, self, k proto.PubKey) bool {
	m, ok := r.Member(self)
	return ok && m.Key == self && !m.PrevKey.IsZero() && m.PrevKey == k
}

// sameMember reports whether asked and from are one member's keys across
// a rotation: a Response from the new key answers a Request sent to the
// old one, and the other way round inside the window.
func sameMember(r *roster.Roster, asked, from proto.PubKey) bool {
	m, ok := r.Member(from)
	return ok && (m.Key == asked || (!m.PrevKey.IsZero() && m.PrevKey == asked))
}
