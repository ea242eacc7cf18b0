package peers

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// Incremental peer exchange (PROTOCOL.md §14.4). A node's peer list is
// its own entry and one per linked peer that told it listen addresses.
// Sending it whole on every link every PeerExchangeInterval costs each
// node O(N²) bytes per interval. Instead, to a peer that speaks
// peer-update frames (it sent one), a node sends what changed since it
// last told that link, batched over ExchangeBatch, and every interval a
// peer-update with no changes: just the digest of the whole list, so a
// receiver whose copy drifted asks for the whole list again (at most once
// per interval). A peer that never sent a peer-update (an older node)
// gets the whole list every interval, as before.

const (
	// exchangeBatchPerLink lengthens the batch with the links held, up
	// to exchangeBatchMax: while a mesh of N nodes forms, every node's
	// list changes every second, and each change goes to every link, so
	// a node sends N frames a batch. With 200 links a batch of 10 s
	// sends 20 frames a second, not 200, carrying the same entries; the
	// addresses a forming mesh needs come mostly with the whole lists
	// sent at link up.
	exchangeBatchPerLink = 50 * time.Millisecond
	exchangeBatchMax     = 10 * time.Second
	// maxTombstones bounds the removals remembered; a link told nothing
	// since the oldest forgotten one gets the whole list instead.
	maxTombstones = 4096
	// MinPeerView bounds a link's copy of the peer's list at
	// max(MinPeerView, 2 × roster members) entries.
	MinPeerView = 64
)

// BatchFor is how long peer-list changes gather on a node holding links
// links before they are sent.
func BatchFor(links int) time.Duration {
	return min(max(ExchangeBatch, time.Duration(links)*exchangeBatchPerLink), exchangeBatchMax)
}

// PeerList is the node's peer list as last announced, versioned so that
// each link can be sent what changed since it was last told. It is
// guarded by the peer table's mutex, but for Dirty.
type PeerList struct {
	ver     uint64                      // bumped by each change
	entries map[proto.PubKey]*listEntry // the list
	digest  [proto.PeerDigestSize]byte
	tombs   map[proto.PubKey]uint64 // removed entries: version of the removal
	floor   uint64                  // removals up to this version are forgotten
	// Dirty (capacity 1) says the list may have changed: the exchange
	// loop waits on it. See Changed.
	Dirty chan struct{}
}

type listEntry struct {
	info proto.PeerInfo
	text string // the key's text form, which whole lists are sorted by
	hash [proto.PeerDigestSize]byte
	ver  uint64 // version of the last change
}

// NewPeerList returns an empty list.
func NewPeerList() *PeerList {
	return &PeerList{entries: map[proto.PubKey]*listEntry{}, tombs: map[proto.PubKey]uint64{}, Dirty: make(chan struct{}, 1)}
}

// Changed notes that the list may have changed: a link came or went, or
// a peer told new listen addresses. Safe without the lock.
func (l *PeerList) Changed() {
	select {
	case l.Dirty <- struct{}{}:
	default:
	}
}

// Version is the list's version: bumped by each change.
func (l *PeerList) Version() uint64 { return l.ver }

// Refresh makes the list want: each key's addresses.
func (l *PeerList) Refresh(want map[proto.PubKey][]string) {
	for k, addrs := range want {
		e := l.entries[k]
		if e != nil && slices.Equal(e.info.Addrs, addrs) {
			continue
		}
		l.ver++
		if e != nil {
			proto.XorDigest(&l.digest, e.hash)
		}
		info := proto.PeerInfo{Key: k, Addrs: slices.Clone(addrs)}
		e = &listEntry{info: info, text: k.String(), hash: proto.PeerEntryHash(info), ver: l.ver}
		l.entries[k] = e
		proto.XorDigest(&l.digest, e.hash)
		delete(l.tombs, k)
	}
	for k, e := range l.entries {
		if _, ok := want[k]; ok {
			continue
		}
		l.ver++
		proto.XorDigest(&l.digest, e.hash)
		delete(l.entries, k)
		l.tombs[k] = l.ver
	}
	if len(l.tombs) > maxTombstones {
		// Forget the older half.
		vers := make([]uint64, 0, len(l.tombs))
		for _, v := range l.tombs {
			vers = append(vers, v)
		}
		slices.Sort(vers)
		cut := vers[len(vers)/2]
		for k, v := range l.tombs {
			if v <= cut {
				delete(l.tombs, k)
			}
		}
		l.floor = max(l.floor, cut)
	}
}

// GossipAddrs returns the addresses of ls a node tells about another
// member: all but Unix sockets, which receivers never take from a third
// party (PROTOCOL.md §14.4), so they would cost every receiver bytes and
// a parse for nothing. A node's own entry keeps them, for peers on its
// host.
func GossipAddrs(ls []string) []string {
	if !slices.ContainsFunc(ls, isUnixAddr) {
		return ls
	}
	return slices.DeleteFunc(slices.Clone(ls), isUnixAddr)
}

func isUnixAddr(s string) bool { return strings.HasPrefix(s, "unix:") }

// DigestFor is the digest of the list as pl's peer gets it: the list
// without the peer's own entry.
func (l *PeerList) DigestFor(pl *Link) [proto.PeerDigestSize]byte {
	d := l.digest
	if e := l.entries[pl.Key]; e != nil {
		proto.XorDigest(&d, e.hash)
	}
	return d
}

// WholeFor returns the whole list as pl's peer gets it (without its own
// entry), sorted, and marks the link told up to now; ok is false when it
// would be empty.
func (l *PeerList) WholeFor(pl *Link) (list proto.PeerList, ok bool) {
	es := make([]*listEntry, 0, len(l.entries))
	for k, e := range l.entries {
		if !k.Equal(pl.Key) {
			es = append(es, e)
		}
	}
	pl.PX.SentVer, pl.PX.Told = l.ver, true
	if len(es) == 0 {
		return list, false
	}
	slices.SortFunc(es, func(a, b *listEntry) int { return strings.Compare(a.text, b.text) })
	list.Peers = make([]proto.PeerInfo, len(es))
	for i, e := range es {
		list.Peers[i] = e.info
	}
	return list, true
}

// NeedsWhole reports whether pl must get the whole list before an
// update: it was told nothing yet, or told before the oldest removal
// remembered.
func (l *PeerList) NeedsWhole(pl *Link) bool {
	return !pl.PX.Told || pl.PX.SentVer < l.floor
}

// UpdateFor returns what changed since pl was last told, with the
// digest, and marks the link told up to now; ok is false when nothing
// changed and neither always nor resync asks for a frame anyway.
func (l *PeerList) UpdateFor(pl *Link, always, resync bool) (u proto.PeerUpdate, ok bool) {
	// A link told up to the list's version (every link, in an idle
	// mesh's rounds) has nothing to find: no scan of the entries and
	// tombstones, O(N) per link and O(N²) per round.
	if pl.PX.SentVer < l.ver {
		for k, e := range l.entries {
			if e.ver > pl.PX.SentVer && !k.Equal(pl.Key) {
				u.Set = append(u.Set, e.info)
			}
		}
		for k, v := range l.tombs {
			if v > pl.PX.SentVer && !k.Equal(pl.Key) {
				u.Removed = append(u.Removed, k)
			}
		}
	}
	pl.PX.SentVer = l.ver
	if len(u.Set) == 0 && len(u.Removed) == 0 && !always && !resync {
		return u, false
	}
	if u.Set == nil {
		u.Set = []proto.PeerInfo{}
	}
	if u.Removed == nil {
		u.Removed = []proto.PubKey{}
	}
	d := l.DigestFor(pl)
	u.Digest = d[:]
	u.Resync = resync
	return u, true
}

// EntryHashes caches [proto.PeerEntryHash] by entry. Every neighbour
// reports the same entries (a member's key and addresses), so a node with
// N links would otherwise encode and hash each of them N times. The zero
// value is ready; it is safe for concurrent use.
type EntryHashes struct {
	mu sync.Mutex
	m  map[string][proto.PeerDigestSize]byte // guarded by mu
}

// Get returns p's hash, keeping at most limit entries (all are forgotten
// when that is reached).
func (c *EntryHashes) Get(p proto.PeerInfo, limit int) [proto.PeerDigestSize]byte {
	b := make([]byte, 0, len(p.Key)+32*len(p.Addrs))
	b = append(b, p.Key[:]...)
	for _, a := range p.Addrs {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	c.mu.Lock()
	h, ok := c.m[string(b)]
	c.mu.Unlock()
	if ok {
		return h
	}
	h = proto.PeerEntryHash(p)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= limit {
		c.m = map[string][proto.PeerDigestSize]byte{}
	}
	c.m[string(b)] = h
	c.mu.Unlock()
	return h
}
