package node

import (
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The rule of a key rotation the send side applies (the rotation itself
// is node/rostergossip's; the receive pipeline's are node/rx's).

// previousKeyOf returns the previous key of the member whose key is k, for
// queues kept under that key before the rotation.
func previousKeyOf(r *roster.Roster, k proto.PubKey) (proto.PubKey, bool) {
	m, ok := r.Member(k)
	if !ok || m.Key != k || m.PrevKey.IsZero() {
		return proto.PubKey{}, false
	}
	return m.PrevKey, true
}
