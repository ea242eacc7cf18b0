package peers

import (
	"slices"
	"time"

	"github.com/meshd/meshd/transport"
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
//     are evicted after MaxGossipFails failed dials in a row. A member
//     takes at most MaxGossipAddrs third-party addresses per EvictedFor:
//     an evicted one counts against the budget until then. So gossip
//     makes a node dial at most MaxGossipAddrs*MaxGossipFails endpoints
//     of a hostile member's choosing per member per EvictedFor.
//   - The member's own claims (its handshake, its own entry in its peer
//     list) come first and may displace third-party addresses.

// Source says who told us an address.
type Source uint8

const (
	Gossip    Source = iota // another member's peer list, or mDNS
	Self                    // the member itself, over TCP
	SelfLocal               // the member itself, over a link from this host
)

const (
	// MaxDialAddrs bounds the addresses kept per member.
	MaxDialAddrs = 8
	// MaxGossipAddrs bounds the third-party addresses kept per member,
	// so a hostile member cannot crowd out the real ones.
	MaxGossipAddrs = 4
	// MaxGossipFails evicts a third-party address after this many failed
	// dials in a row.
	MaxGossipFails = 3
	// MaxSelfFails evicts a member's own address after this many failed
	// dials in a row; the member tells us again when it next links.
	MaxSelfFails = 10
	// EvictedFor is how long an evicted address is not taken again from
	// a third party.
	EvictedFor = 10 * time.Minute
	// maxEvicted bounds the evicted addresses remembered per member.
	maxEvicted = 16
	// GossipRecheck is how long a member's addresses, as a third party
	// told them, are not merged again when another tells the same. In a
	// full mesh of N nodes each node hears every member's list from N-1
	// neighbours; merging (parsing) it once a minute is enough, and an
	// address evicted meanwhile is retaken at most that late.
	GossipRecheck = time.Minute
)

// addrInfo is what we know of one dial address of a member.
type addrInfo struct {
	src   Source
	fails int // failed dials in a row
}

// AddrBook is where one member can be dialled, in the order learnt,
// with where each address came from and how its dials went. The zero
// value is an empty book. It is not safe for concurrent use: the node
// guards it with its peers mutex.
type AddrBook struct {
	addrs []transport.Addr
	// info says where each of addrs came from and how its dials went;
	// evicted holds addresses dropped after failing, until when they are
	// not taken again from third parties. Nil for a seed's book.
	info    map[transport.Addr]*addrInfo
	evicted map[transport.Addr]time.Time
	// gossiped is the last address list a third party told for the
	// member, merged at gossipedAt: the same list from the member's
	// other neighbours is skipped for GossipRecheck.
	gossiped      []string
	gossipedAt    time.Time
	gossipIgnored int // addresses of gossiped that the merge ignored
}

// SeedBook is the book of a static seed: its one configured address,
// which dials never evict.
func SeedBook(a transport.Addr) AddrBook {
	return AddrBook{addrs: []transport.Addr{a}}
}

// List returns the addresses, in the order learnt. The caller must not
// change the slice.
func (b *AddrBook) List() []transport.Addr { return b.addrs }

// Len is the number of addresses.
func (b *AddrBook) Len() int { return len(b.addrs) }

// SourceOf says who told a, and whether the book holds a at all.
func (b *AddrBook) SourceOf(a transport.Addr) (Source, bool) {
	if in := b.info[a]; in != nil {
		return in.src, true
	}
	return 0, false
}

// Merge records addresses the member says (src Self…) or a third party
// says (Gossip) it can be reached at, under the rules above. It returns
// how many it ignored under them, and how many it added.
func (b *AddrBook) Merge(addrs []string, src Source, now time.Time) (ignored, added int) {
	if b.info == nil {
		b.info = map[transport.Addr]*addrInfo{}
	}
	if src == Gossip {
		if now.Sub(b.gossipedAt) < GossipRecheck && slices.Equal(b.gossiped, addrs) {
			return b.gossipIgnored, 0 // skipped again, counted again
		}
		b.gossiped, b.gossipedAt = addrs, now
		defer func() { b.gossipIgnored = ignored }()
	}
	for _, s := range addrs {
		a, err := transport.ParseAddr(s)
		if err != nil {
			continue
		}
		if a.Network == "unix" && src != SelfLocal {
			ignored++
			continue
		}
		if in := b.info[a]; in != nil {
			if src > in.src {
				in.src = src // the member confirms it
			}
			continue
		}
		if src == Gossip {
			if until, ok := b.evicted[a]; ok && now.Before(until) {
				ignored++
				continue
			}
			if b.CountFrom(Gossip)+b.liveEvicted(now) >= MaxGossipAddrs {
				ignored++
				continue
			}
		}
		if len(b.addrs) >= MaxDialAddrs {
			if src == Gossip || !b.dropGossip() {
				ignored++
				continue
			}
		}
		b.addrs = append(b.addrs, a)
		b.info[a] = &addrInfo{src: src}
		added++
	}
	return ignored, added
}

// CountFrom counts the addresses from src.
func (b *AddrBook) CountFrom(src Source) int {
	c := 0
	for _, in := range b.info {
		if in.src == src {
			c++
		}
	}
	return c
}

// liveEvicted counts the third-party addresses evicted within
// EvictedFor: they use up the member's third-party budget until then.
func (b *AddrBook) liveEvicted(now time.Time) int {
	c := 0
	for _, until := range b.evicted {
		if now.Before(until) {
			c++
		}
	}
	return c
}

// dropGossip removes the oldest third-party address, if there is one.
func (b *AddrBook) dropGossip() bool {
	for i, a := range b.addrs {
		if in := b.info[a]; in != nil && in.src == Gossip {
			b.remove(i)
			return true
		}
	}
	return false
}

// remove forgets address i. The next third-party list is merged again
// even if it repeats the last one (see gossiped).
func (b *AddrBook) remove(i int) {
	delete(b.info, b.addrs[i])
	b.addrs = slices.Delete(b.addrs, i, i+1)
	b.gossipedAt = time.Time{}
}

// Clear forgets every address (the member left the roster, or rotated
// its key).
func (b *AddrBook) Clear() {
	b.addrs, b.info = nil, nil
	b.gossipedAt = time.Time{}
}

// DialResult records the outcome of dialling the addresses: failed lost
// their dials, ok (if not zero) linked. It returns how many addresses it
// evicted for failing too often. A seed's book keeps its address.
func (b *AddrBook) DialResult(failed []transport.Addr, ok transport.Addr, now time.Time) (evicted int) {
	if b.info == nil {
		return 0
	}
	if in := b.info[ok]; in != nil {
		in.fails = 0
	}
	for _, a := range failed {
		in := b.info[a]
		if in == nil {
			continue
		}
		in.fails++
		limit := MaxSelfFails
		if in.src == Gossip {
			limit = MaxGossipFails
		}
		if in.fails < limit {
			continue
		}
		if i := slices.Index(b.addrs, a); i >= 0 {
			b.remove(i)
		}
		evicted++
		if in.src == Gossip {
			b.evict(a, now)
		}
	}
	return evicted
}

// evict keeps a from being taken again from third parties until
// EvictedFor from now, within maxEvicted remembered addresses.
func (b *AddrBook) evict(a transport.Addr, now time.Time) {
	if b.evicted == nil {
		b.evicted = map[transport.Addr]time.Time{}
	}
	if len(b.evicted) >= maxEvicted {
		for k, t := range b.evicted {
			if now.After(t) || len(b.evicted) >= maxEvicted {
				delete(b.evicted, k)
			}
		}
	}
	b.evicted[a] = now.Add(EvictedFor)
}
