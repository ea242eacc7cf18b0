package node

import (
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famAddrEvicted = newFamily("meshd_addresses_evicted_total", "Gossiped addresses dropped after failed dials.")

	cAddrEvicted = newCounter("addr.evicted", famAddrEvicted)
)

// mergeAddrsLocked records addresses member key says (src peers.Self…)
// or a third party says (peers.Gossip) it can be reached at, in its
// address book (peers.AddrBook has the rules). Our own key and
// non-members are left out. It returns how many addresses it ignored,
// and how many it added.
func (n *Node) mergeAddrsLocked(key proto.PubKey, addrs []string, src peers.Source) (ignored, added int) {
	if key.Equal(n.id.Pub) {
		return 0, 0
	}
	if _, ok := n.Roster().Member(key); !ok {
		return 0, 0
	}
	return n.peers.MemberLocked(key).Addrs.Merge(addrs, src, time.Now())
}
