package node

import (
	"slices"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famAddrEvicted = newFamily("meshd_addresses_evicted_total", "Gossiped addresses dropped after failed dials.")

	cAddrEvicted = newCounter("addr.evicted", famAddrEvicted)
)

// Where a member's dial addresses come from, and the rules that keep a
// member from steering other nodes' dials (PROTOCOL.md §14.8,
// SECURITY.md "Hostile peers"):
//
//   - A Unix socket address is taken only from configuration (seeds) or
//     from the member itself over a link from this host (a Unix socket,
//     or TCP from a loopback or local address): a socket path means
//     nothing on another host. Peer lists and mDNS never add one.
//   - TCP addresses from third parties (peer lists, mDNS) are kept only
//     for the member they are claimed for (the dial expects its key), and
//     are evicted after maxGossipFails failed dials in a row. A member
//     takes at most maxGossipAddrs third-party addresses per evictedFor:
//     an evicted one counts against the budget until then. So gossip
//     makes a node dial at most maxGossipAddrs*maxGossipFails endpoints
//     of a hostile member's choosing per member per evictedFor.
//   - The member's own claims (its handshake, its own entry in its peer
//     list) come first and may displace third-party addresses.

// addrSource says who told us an address.
type addrSource uint8

const (
	addrGossip    addrSource = iota // another member's peer list, or mDNS
	addrSelf                        // the member itself, over TCP
	addrSelfLocal                   // the member itself, over a link from this host
)

const (
	// maxDialAddrs bounds the addresses kept per member.
	maxDialAddrs = 8
	// maxGossipAddrs bounds the third-party addresses kept per member,
	// so a hostile member cannot crowd out the real ones.
	maxGossipAddrs = 4
	// maxGossipFails evicts a third-party address after this many failed
	// dials in a row.
	maxGossipFails = 3
	// maxSelfFails evicts a member's own address after this many failed
	// dials in a row; the member tells us again when it next links.
	maxSelfFails = 10
	// evictedFor is how long an evicted address is not taken again from
	// a third party.
	evictedFor = 10 * time.Minute
	// maxEvicted bounds the evicted addresses remembered per member.
	maxEvicted = 16
)

// addrInfo is what we know of one dial address of a member.
type addrInfo struct {
	src   addrSource
	fails int // failed dials in a row
}

// mergeAddrsLocked records addresses member key says (src addrSelf…) or
// a third party says (addrGossip) it can be reached at, under the rules
// above. It returns how many it ignored under them, and how many it
// added.
func (n *Node) mergeAddrsLocked(key proto.PubKey, addrs []string, src addrSource) (ignored, added int) {
	if key.Equal(n.id.Pub) {
		return 0, 0
	}
	if _, ok := n.Roster().Member(key); !ok {
		return 0, 0
	}
	p := n.memberLocked(key)
	if p.info == nil {
		p.info = map[transport.Addr]*addrInfo{}
	}
	now := time.Now()
	if src == addrGossip {
		if now.Sub(p.gossipedAt) < gossipRecheck && slices.Equal(p.gossiped, addrs) {
			return p.gossipIgnored, 0 // skipped again, counted again
		}
		p.gossiped, p.gossipedAt = addrs, now
		defer func() { p.gossipIgnored = ignored }()
	}
	for _, s := range addrs {
		a, err := transport.ParseAddr(s)
		if err != nil {
			continue
		}
		if a.Network == "unix" && src != addrSelfLocal {
			ignored++
			continue
		}
		if in := p.info[a]; in != nil {
			if src > in.src {
				in.src = src // the member confirms it
			}
			continue
		}
		if src == addrGossip {
			if until, ok := p.evicted[a]; ok && now.Before(until) {
				ignored++
				continue
			}
			if p.countSrc(addrGossip)+p.liveEvicted(now) >= maxGossipAddrs {
				ignored++
				continue
			}
		}
		if len(p.addrs) >= maxDialAddrs {
			if src == addrGossip || !p.dropGossip() {
				ignored++
				continue
			}
		}
		p.addrs = append(p.addrs, a)
		p.info[a] = &addrInfo{src: src}
		added++
	}
	return ignored, added
}

// countSrc counts p's addresses from src.
func (p *peer) countSrc(src addrSource) int {
	c := 0
	for _, in := range p.info {
		if in.src == src {
			c++
		}
	}
	return c
}

// liveEvicted counts p's third-party addresses evicted within evictedFor:
// they use up the member's third-party budget until then.
func (p *peer) liveEvicted(now time.Time) int {
	c := 0
	for _, until := range p.evicted {
		if now.Before(until) {
			c++
		}
	}
	return c
}

// dropGossip removes p's oldest third-party address, if it has one.
func (p *peer) dropGossip() bool {
	for i, a := range p.addrs {
		if in := p.info[a]; in != nil && in.src == addrGossip {
			p.removeAddr(i)
			return true
		}
	}
	return false
}

// removeAddr forgets p's address i. The next third-party list for p is
// merged again even if it repeats the last one (see gossiped).
func (p *peer) removeAddr(i int) {
	delete(p.info, p.addrs[i])
	p.addrs = slices.Delete(p.addrs, i, i+1)
	p.gossipedAt = time.Time{}
}

// clearAddrs forgets every address of p (it left the roster).
func (p *peer) clearAddrs() {
	p.addrs, p.info = nil, nil
	p.gossipedAt = time.Time{}
}

// dialResultLocked records the outcome of dialling p's addresses: failed
// lost their dials, ok (if not zero) linked.
func (n *Node) dialResultLocked(p *peer, failed []transport.Addr, ok transport.Addr) {
	if p.seed || p.info == nil {
		return
	}
	if in := p.info[ok]; in != nil {
		in.fails = 0
	}
	now := time.Now()
	for _, a := range failed {
		in := p.info[a]
		if in == nil {
			continue
		}
		in.fails++
		limit := maxSelfFails
		if in.src == addrGossip {
			limit = maxGossipFails
		}
		if in.fails < limit {
			continue
		}
		if i := slices.Index(p.addrs, a); i >= 0 {
			p.removeAddr(i)
		}
		n.metrics.inc(cAddrEvicted)
		if in.src == addrGossip {
			if p.evicted == nil {
				p.evicted = map[transport.Addr]time.Time{}
			}
			if len(p.evicted) >= maxEvicted {
				for k, t := range p.evicted {
					if now.After(t) || len(p.evicted) >= maxEvicted {
						delete(p.evicted, k)
					}
				}
			}
			p.evicted[a] = now.Add(evictedFor)
		}
	}
}
