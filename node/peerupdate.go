package node

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	cPeersUpdates        = newEvent("peers.updates")
	cPeersResyncAsked    = newEvent("peers.resync_asked")
	cPeersDigestMismatch = newEvent("peers.digest_mismatch")
)

// Incremental peer exchange (PROTOCOL.md §14.4). A node's peer list is
// its own entry and one per linked peer that told it listen addresses.
// Sending it whole on every link every PeerExchangeInterval costs each
// node O(N²) bytes per interval. Instead, to a peer that speaks
// peer-update frames (it sent one), a node sends what changed since it
// last told that link, batched over pxBatch, and every interval a
// peer-update with no changes: just the digest of the whole list, so a
// receiver whose copy drifted asks for the whole list again (at most once
// per interval). A peer that never sent a peer-update (an older node)
// gets the whole list every interval, as before.

const (
	// pxBatch is how long changes gather before they are sent, at least;
	// see pxBatchFor.
	pxBatch = time.Second
	// pxBatchPerLink lengthens the batch with the links held, up to
	// pxBatchMax: while a mesh of N nodes forms, every node's list
	// changes every second, and each change goes to every link, so a
	// node sends N frames a batch. With 200 links a batch of 10 s sends
	// 20 frames a second, not 200, carrying the same entries; the
	// addresses a forming mesh needs come mostly with the whole lists
	// sent at link up.
	pxBatchPerLink = 50 * time.Millisecond
	pxBatchMax     = 10 * time.Second
	// maxTombstones bounds the removals remembered; a link told nothing
	// since the oldest forgotten one gets the whole list instead.
	maxTombstones = 4096
	// minPeerView bounds a link's copy of the peer's list at
	// max(minPeerView, 2 × roster members) entries.
	minPeerView = 64
)

// peerExchange is the node's peer list as last announced, versioned so
// that each link can be sent what changed since it was last told. It is
// guarded by the peers mutex.
type peerExchange struct {
	ver     uint64                    // bumped by each change
	entries map[proto.PubKey]*pxEntry // the list
	digest  [proto.PeerDigestSize]byte
	tombs   map[proto.PubKey]uint64 // removed entries: version of the removal
	floor   uint64                  // removals up to this version are forgotten
	dirty   chan struct{}           // capacity 1: the list may have changed
}

type pxEntry struct {
	info proto.PeerInfo
	text string // the key's text form, which whole lists are sorted by
	hash [proto.PeerDigestSize]byte
	ver  uint64 // version of the last change
}

// pxBatchFor is how long changes gather on a node holding links links.
func pxBatchFor(links int) time.Duration {
	return min(max(pxBatch, time.Duration(links)*pxBatchPerLink), pxBatchMax)
}

// pxChanged notes that the peer list may have changed: a link came or
// went, or a peer told new listen addresses.
func (n *Node) pxChanged() {
	select {
	case n.px.dirty <- struct{}{}:
	default:
	}
}

// pxRefreshLocked brings the list up to date with the links held.
func (n *Node) pxRefreshLocked() {
	px := &n.px
	if px.entries == nil {
		px.entries = map[proto.PubKey]*pxEntry{}
		px.tombs = map[proto.PubKey]uint64{}
	}
	want := make(map[proto.PubKey][]string, len(n.peers.ByKey)+1)
	if adv := n.advertisedAddrs(); len(adv) > 0 {
		want[n.id.Pub] = adv
	}
	for k, p := range n.peers.ByKey {
		if p.Link == nil {
			continue
		}
		if ls := gossipAddrs(p.Link.ListenAddrs()); len(ls) > 0 {
			want[k] = ls
		}
	}
	for k, addrs := range want {
		e := px.entries[k]
		if e != nil && slices.Equal(e.info.Addrs, addrs) {
			continue
		}
		px.ver++
		if e != nil {
			proto.XorDigest(&px.digest, e.hash)
		}
		info := proto.PeerInfo{Key: k, Addrs: slices.Clone(addrs)}
		e = &pxEntry{info: info, text: k.String(), hash: proto.PeerEntryHash(info), ver: px.ver}
		px.entries[k] = e
		proto.XorDigest(&px.digest, e.hash)
		delete(px.tombs, k)
	}
	for k, e := range px.entries {
		if _, ok := want[k]; ok {
			continue
		}
		px.ver++
		proto.XorDigest(&px.digest, e.hash)
		delete(px.entries, k)
		px.tombs[k] = px.ver
	}
	if len(px.tombs) > maxTombstones {
		// Forget the older half.
		vers := make([]uint64, 0, len(px.tombs))
		for _, v := range px.tombs {
			vers = append(vers, v)
		}
		slices.Sort(vers)
		cut := vers[len(vers)/2]
		for k, v := range px.tombs {
			if v <= cut {
				delete(px.tombs, k)
			}
		}
		px.floor = max(px.floor, cut)
	}
}

// gossipAddrs returns the addresses of ls a node tells about another
// member: all but Unix sockets, which receivers never take from a third
// party (PROTOCOL.md §14.4), so they would cost every receiver bytes and
// a parse for nothing. A node's own entry keeps them, for peers on its
// host.
func gossipAddrs(ls []string) []string {
	if !slices.ContainsFunc(ls, isUnixAddr) {
		return ls
	}
	return slices.DeleteFunc(slices.Clone(ls), isUnixAddr)
}

func isUnixAddr(s string) bool { return strings.HasPrefix(s, "unix:") }

// entryHashes caches [proto.PeerEntryHash] by entry. Every neighbour
// reports the same entries (a member's key and addresses), so a node with
// N links would otherwise encode and hash each of them N times.
type entryHashes struct {
	mu sync.Mutex
	m  map[string][proto.PeerDigestSize]byte // guarded by mu
}

// get returns p's hash, keeping at most limit entries (all are forgotten
// when that is reached).
func (c *entryHashes) get(p proto.PeerInfo, limit int) [proto.PeerDigestSize]byte {
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

// digestForLocked is the digest of the list as pl's peer gets it: the
// list without the peer's own entry.
func (n *Node) digestForLocked(pl *peers.Link) [proto.PeerDigestSize]byte {
	d := n.px.digest
	if e := n.px.entries[pl.Key]; e != nil {
		proto.XorDigest(&d, e.hash)
	}
	return d
}

// sendPeersLocked sends pl the whole list in a peers frame (unless it
// would be empty), and marks the link told up to now.
func (n *Node) sendPeersLocked(pl *peers.Link) {
	es := make([]*pxEntry, 0, len(n.px.entries))
	for k, e := range n.px.entries {
		if !k.Equal(pl.Key) {
			es = append(es, e)
		}
	}
	pl.PX.SentVer, pl.PX.Told = n.px.ver, true
	if len(es) == 0 {
		return
	}
	slices.SortFunc(es, func(a, b *pxEntry) int { return strings.Compare(a.text, b.text) })
	list := proto.PeerList{Peers: make([]proto.PeerInfo, len(es))}
	for i, e := range es {
		list.Peers[i] = e.info
	}
	b, err := proto.Marshal(&list)
	if err != nil {
		return
	}
	n.sendFrame(pl, proto.FramePeers, b)
}

// sendUpdateLocked sends pl what changed since it was last told, with
// the digest; with always, even when nothing did. A link told nothing
// yet, or told before the oldest removal remembered, gets the whole list
// first. Frames are built and queued under the peers mutex, so that
// those of one link go out in the order of their versions.
func (n *Node) sendUpdateLocked(pl *peers.Link, always, resync bool) {
	px := &n.px
	if !pl.PX.Told || pl.PX.SentVer < px.floor {
		n.sendPeersLocked(pl)
		always = true
	}
	var u proto.PeerUpdate
	for k, e := range px.entries {
		if e.ver > pl.PX.SentVer && !k.Equal(pl.Key) {
			u.Set = append(u.Set, e.info)
		}
	}
	for k, v := range px.tombs {
		if v > pl.PX.SentVer && !k.Equal(pl.Key) {
			u.Removed = append(u.Removed, k)
		}
	}
	pl.PX.SentVer = px.ver
	if len(u.Set) == 0 && len(u.Removed) == 0 && !always && !resync {
		return
	}
	if u.Set == nil {
		u.Set = []proto.PeerInfo{}
	}
	if u.Removed == nil {
		u.Removed = []proto.PubKey{}
	}
	d := n.digestForLocked(pl)
	u.Digest = d[:]
	u.Resync = resync
	b, err := proto.Marshal(&u)
	if err != nil {
		return
	}
	n.sendFrame(pl, proto.FramePeerUpdate, b)
}

// pxLinkUp tells a new link the whole list, then a peer-update saying
// that this node speaks them.
func (n *Node) pxLinkUp(pl *peers.Link) {
	n.peers.Lock()
	defer n.peers.Unlock()
	n.pxRefreshLocked()
	n.sendPeersLocked(pl)
	if !n.test.oldPeerExchange() {
		n.sendUpdateLocked(pl, true, false)
	}
}

// pxSend runs a round: with periodic, the interval's round (the whole
// list to older peers, the digest to the others); otherwise the changes
// only, to peers that speak peer-update.
func (n *Node) pxSend(links []*peers.Link, periodic bool) {
	n.peers.Lock()
	defer n.peers.Unlock()
	n.pxRefreshLocked()
	for _, pl := range links {
		if n.peers.ByKey[pl.Key] == nil || n.peers.ByKey[pl.Key].Link != pl {
			continue // gone meanwhile
		}
		switch {
		case pl.PX.Speaks.Load() && !n.test.oldPeerExchange():
			n.sendUpdateLocked(pl, periodic, false)
		case periodic:
			n.sendPeersLocked(pl)
		}
	}
}

// handlePeerUpdate applies a peer-update to the link's copy of the
// peer's list and takes the addresses as a peers frame's are taken.
func (n *Node) handlePeerUpdate(pl *peers.Link, payload []byte) {
	u, err := proto.ParsePeerUpdate(payload)
	if err != nil {
		n.metrics.inc(cPeersMalformed)
		n.logRL.warn(n.log, "bad peer update", pl.Key.Fingerprint(), "peers.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	pl.PX.Speaks.Store(true)
	n.metrics.inc(cPeersUpdates)
	if u.IgnoredAddrs > 0 {
		n.metrics.add(cAddrIgnored, uint64(u.IgnoredAddrs))
	}
	if u.Resync {
		n.metrics.inc(cPeersResyncAsked)
		n.peers.Lock()
		if time.Since(pl.PX.AnsweredAt) >= n.cfg.PeerExchangeInterval {
			pl.PX.AnsweredAt = time.Now()
			pl.PX.Told = false // the whole list, then an update
			n.sendUpdateLocked(pl, true, false)
		}
		n.peers.Unlock()
	}
	pl.PX.ViewMu.Lock()
	for _, k := range u.Removed {
		pl.PX.ViewDel(k)
	}
	limit := n.viewLimit()
	for _, p := range u.Set {
		pl.PX.ViewSet(p, n.pxHashes.get, limit)
	}
	pl.PX.ViewAt = time.Now()
	drift := [proto.PeerDigestSize]byte(u.Digest) != pl.PX.ViewDigest
	pl.PX.ViewMu.Unlock()
	if len(u.Set) > 0 {
		n.takePeerAddrs(pl, u.Set)
	}
	if !drift {
		return
	}
	n.metrics.inc(cPeersDigestMismatch)
	if !pl.PX.AskedAt.IsZero() && time.Since(pl.PX.AskedAt) < n.cfg.PeerExchangeInterval {
		return
	}
	pl.PX.AskedAt = time.Now()
	n.peers.Lock()
	n.sendUpdateLocked(pl, true, true)
	n.peers.Unlock()
}

// pxViewReplace makes the link's copy of the peer's list the whole list
// it just received.
func (n *Node) pxViewReplace(pl *peers.Link, list []proto.PeerInfo) {
	limit := n.viewLimit()
	pl.PX.ViewMu.Lock()
	defer pl.PX.ViewMu.Unlock()
	pl.PX.View = nil
	pl.PX.ViewDigest = [proto.PeerDigestSize]byte{}
	pl.PX.ViewAt = time.Now()
	for _, p := range list {
		pl.PX.ViewSet(p, n.pxHashes.get, limit)
	}
}

func (n *Node) viewLimit() int { return max(minPeerView, 2*len(n.Roster().Members)) }
