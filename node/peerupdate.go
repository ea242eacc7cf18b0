package node

import (
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

// Incremental peer exchange (PROTOCOL.md §14.4): the list and what each
// link is told of it are peers.PeerList's; the node builds the list from
// its links, sends the frames and keeps each link's view of its peer's
// list.

// pxChanged notes that the peer list may have changed: a link came or
// went, or a peer told new listen addresses.
func (n *Node) pxChanged() { n.peers.List.Changed() }

// pxRefreshLocked brings the list up to date with the links held.
func (n *Node) pxRefreshLocked() {
	want := make(map[proto.PubKey][]string, len(n.peers.ByKey)+1)
	if adv := n.advertisedAddrs(); len(adv) > 0 {
		want[n.id.Pub] = adv
	}
	for k, p := range n.peers.ByKey {
		if p.Link == nil {
			continue
		}
		if ls := peers.GossipAddrs(p.Link.ListenAddrs()); len(ls) > 0 {
			want[k] = ls
		}
	}
	n.peers.List.Refresh(want)
}

// sendPeersLocked sends pl the whole list in a peers frame (unless it
// would be empty), and marks the link told up to now.
func (n *Node) sendPeersLocked(pl *peers.Link) {
	list, ok := n.peers.List.WholeFor(pl)
	if !ok {
		return
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
	if n.peers.List.NeedsWhole(pl) {
		n.sendPeersLocked(pl)
		always = true
	}
	u, ok := n.peers.List.UpdateFor(pl, always, resync)
	if !ok {
		return
	}
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
		pl.PX.ViewSet(p, n.peers.Hashes.Get, limit)
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
		pl.PX.ViewSet(p, n.peers.Hashes.Get, limit)
	}
}

func (n *Node) viewLimit() int { return max(peers.MinPeerView, 2*len(n.Roster().Members)) }
