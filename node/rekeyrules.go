package node

import (
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The rules of a key rotation that the receive pipeline and delivery
// apply (the rotation itself is node/rostergossip's).

// senderRefusal names why the roster refuses k as a sender: a previous key
// past its window, or a stranger.
func senderRefusal(r *roster.Roster, k proto.PubKey) dropReason {
	if _, ok := r.Previous(k); ok {
		return dropRetiredKey
	}
	return dropNotMember
}

// ownPreviousKey reports whether k is the previous key in r of self, this
// node's key: an envelope addressed to it (sent before the sender learnt
// of the rotation) is for this node.
func ownPreviousKey(r *roster.Roster, self, k proto.PubKey) bool {
	m, ok := r.Member(self)
	return ok && m.Key == self && !m.PrevKey.IsZero() && m.PrevKey == k
}

// previousKeyOf returns the previous key of the member whose key is k, for
// queues kept under that key before the rotation.
func previousKeyOf(r *roster.Roster, k proto.PubKey) (proto.PubKey, bool) {
	m, ok := r.Member(k)
	if !ok || m.Key != k || m.PrevKey.IsZero() {
		return proto.PubKey{}, false
	}
	return m.PrevKey, true
}

// sameMember reports whether asked and from are one member's keys across
// a rotation: a Response from the new key answers a Request sent to the
// old one, and the other way round inside the window.
func sameMember(r *roster.Roster, asked, from proto.PubKey) bool {
	m, ok := r.Member(from)
	return ok && (m.Key == asked || (!m.PrevKey.IsZero() && m.PrevKey == asked))
}
