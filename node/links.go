package node

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The links' counters.
var (
	famLinkEvents   = newFamily("meshd_link_events_total", "Link lifecycle events.", "event")
	famLinkRejected = newFamily("meshd_links_rejected_total", "Links closed after the handshake, by reason.", "reason")
	famDials        = newFamily("meshd_dials_total", "Outbound dial attempts.")
	famDialFailures = newFamily("meshd_dial_failures_total", "Outbound dials that failed.")
	famSeedFailures = newFamily("meshd_seed_dial_failures_total", "Dials to static seeds that failed.")
	famDialRefused  = newFamily("meshd_dials_refused_total", "Dials that ended in a refusal (the peer holds us not a member); they back off like failures.")
	famMDNSSeen     = newFamily("meshd_mdns_seen_total", "mDNS announcements seen.")
	famMDNSIgnored  = newFamily("meshd_mdns_ignored_total", "mDNS announcements ignored, by reason.", "reason")
	famPeersIgnored = newFamily("meshd_peer_exchange_ignored_total", "Peer exchange entries or frames ignored, by reason.", "reason")
	famAddrIgnored  = newFamily("meshd_addresses_ignored_total", "Listen addresses in handshakes or peer lists that could not be dialled and were skipped.")
	famFrameDropped = newFamily("meshd_frames_send_dropped_total", "Control frames a link refused, by frame type.", "frame")
	famFrameInvalid = newFamily("meshd_frames_invalid_total", "Frames received that were empty or of an unknown type.", "reason")

	cLinkUp                = newCounter("link.up", famLinkEvents, "up")
	cLinkDown              = newCounter("link.down", famLinkEvents, "down")
	cLinkDuplicate         = newCounter("link.duplicate", famLinkEvents, "duplicate")
	cLinkRejectedNotMember = newCounter("link.rejected.not_member", famLinkRejected, "not_member")
	cDialAttempt           = newCounter("dial.attempt", famDials)
	cDialFailed            = newCounter("dial.failed", famDialFailures)
	cDialSeedFailed        = newCounter("dial.seed_failed", famSeedFailures)
	cDialRefused           = newCounter("dial.refused", famDialRefused)
	cMDNSSeen              = newCounter("mdns.seen", famMDNSSeen)
	cMDNSIgnoredVersion    = newCounter("mdns.ignored.protocol_version", famMDNSIgnored, "protocol_version")
	cMDNSIgnoredNotMember  = newCounter("mdns.ignored.not_member", famMDNSIgnored, "not_member")
	cPeersMalformed        = newCounter("peers.malformed", famPeersIgnored, "malformed")
	cPeersIgnoredNotMember = newCounter("peers.ignored.not_member", famPeersIgnored, "not_member")
	cAddrIgnored           = newCounter("addr.ignored", famAddrIgnored)
	cFrameEmpty            = newCounter("frame.empty", famFrameInvalid, "empty")
	cFrameUnknown          = newCounter("frame.unknown", famFrameInvalid, "unknown")
	// cSendDropped counts "send.dropped.<frame>": frames a link refused.
	cSendDropped = newFrameVec("send.dropped.", famFrameDropped)
	// cLinkDownBy counts "link.down.<why>" by [downReason].
	cLinkDownBy = newEventVec[linkDown]("link.down.", linkDownNames[:])
)

// linkDown says why a link went down.
type linkDown uint8

const (
	linkDownClosed linkDown = iota
	linkDownSlowReader
	linkDownTimeout
	linkDownError
	numLinkDown
)

var linkDownNames = [numLinkDown]string{"closed", "slow_reader", "timeout", "error"}

// peer is another node we may hold a link to and may dial: a roster
// member (in the node's peers.byKey), or a static seed (peers.seeds),
// which is dialled by address whatever key answers. Every field is
// guarded by the node's peers mutex.
type peer struct {
	key  proto.PubKey // for a seed, zero until its first link, then the last key it answered with
	seed bool         // a static seed: its one address may come to host another member (a reinstall)
	// link is the admitted link to the member; nil while there is none.
	// Always nil for a seed: its link belongs to the member it reached.
	link *peerLink
	// addrs is where to dial, in the order learnt; a seed has its one.
	addrs []transport.Addr
	// info says where each of addrs came from and how its dials went;
	// evicted holds addresses dropped after failing, until when they are
	// not taken again from third parties (see addrs.go). Nil for seeds.
	info    map[transport.Addr]*addrInfo
	evicted map[transport.Addr]time.Time

	// The dial backoff.
	fails   int       // dials failed in a row
	next    time.Time // earliest next dial
	dialing bool      // a dial is running
	// lastDial holds why each address of the last dial failed, for
	// meshctl doctor; nil once a dial links (see doctor_dial.go).
	lastDial []dialFailure
	// refusals counts links in a row the member refused (see refuse.go).
	refusals int
	// spread is set once the first dial of the member has been put off
	// by firstDialDelay (see dialspread.go).
	spread bool
	// gossiped is the last address list a third party told for the
	// member, merged at gossipedAt: the same list from the member's other
	// neighbours is skipped for gossipRecheck (see mergeAddrsLocked).
	gossiped      []string
	gossipedAt    time.Time
	gossipIgnored int // addresses of gossiped that the merge ignored
	// move is the state of moving the link to the member's Unix socket
	// (see unixmove.go).
	move unixMove
}

// gossipRecheck is how long a member's addresses, as a third party told
// them, are not merged again when another tells the same. In a full mesh
// of N nodes each node hears every member's list from N-1 neighbours;
// merging (parsing) it once a minute is enough, and an address evicted
// meanwhile is retaken at most that late.
const gossipRecheck = time.Minute

// linkedLocked returns the link to k, or nil.
func (n *Node) linkedLocked(k proto.PubKey) *peerLink {
	if p := n.peers.byKey[k]; p != nil {
		return p.link
	}
	return nil
}

// memberLocked returns the entry of member k, creating it.
func (n *Node) memberLocked(k proto.PubKey) *peer {
	p := n.peers.byKey[k]
	if p == nil {
		p = &peer{key: k}
		n.peers.byKey[k] = p
	}
	return p
}

func (n *Node) acceptLoop(ln *transport.Listener) {
	defer n.wg.Done()
	for {
		l, err := ln.Accept(n.ctx)
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, transport.ErrClosed) {
				return
			}
			// Failed handshakes are logged and counted by the transport;
			// anything returned here is the listener itself failing.
			n.log.Warn("accept", "addr", ln.Addr().String(), "err", err)
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		n.addLink(l)
	}
}

// addLink registers an admitted link, resolving duplicates so that each
// peer pair keeps exactly one link, and starts serving it.
func (n *Node) addLink(l *transport.Link) {
	if n.refuseSlow(l) {
		return
	}
	key := l.PeerKey()
	pl := &peerLink{link: l, key: key, payload: l.Peer()}
	n.peers.Lock()
	if n.peers.closed {
		n.peers.Unlock()
		_ = l.Close()
		return
	}
	if _, ok := n.Roster().Member(key); !ok {
		// The roster changed between the handshake and now.
		n.peers.Unlock()
		n.metrics.inc(cLinkRejectedNotMember)
		_ = l.Send(goodbyeFrame("not a member of the current roster"))
		_ = l.Close()
		return
	}
	var loser, deferred *peerLink
	p := n.memberLocked(key)
	if old := p.link; old != nil {
		keep, moved := n.preferLink(p, old.link, l)
		if keep == old.link {
			n.peers.Unlock()
			n.metrics.inc(cLinkDuplicate)
			n.log.Debug("duplicate link closed", "peer", key.Fingerprint(), "addr", l.RemoteAddr())
			n.retireNewLoser(pl)
			return
		}
		loser = old
		pl.payload = carryClaims(pl.payload, l, old)
		if moved && l.Outbound() {
			deferred = old // retired once the peer has taken l (unixmove.go)
		} else {
			n.retireLoser(old, pl) // before pl is published: its frames go first
		}
	}
	p.link = pl
	p.fails = 0
	p.spread = true // linked: later dials are redials
	for _, s := range n.peers.seeds {
		if !s.dialing && s.key.Equal(key) {
			s.fails = 0
		}
	}
	ignored, _ := n.mergeAddrsLocked(key, pl.payload.Listen, selfSource(l))
	n.peers.Unlock()
	if pl.payload.IgnoredListen+ignored > 0 {
		n.metrics.add(cAddrIgnored, uint64(pl.payload.IgnoredListen+ignored))
	}
	if loser != nil {
		n.metrics.inc(cLinkDuplicate)
	}
	n.metrics.inc(cLinkUp)
	n.pxChanged()
	if l.Network() == "tcp" {
		n.wake() // a move to the peer's Unix socket may be due (unixmove.go)
	}
	dir := "inbound"
	if l.Outbound() {
		dir = "outbound"
	}
	n.log.Info("link up", "peer", key.Fingerprint(), "name", pl.payload.Name, "addr", l.RemoteAddr(),
		"network", l.Network(), "dir", dir, "peer_roster", pl.payload.RosterVersion)

	l.Start(n.frameHandler(pl, deferred))
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-l.Done()
		n.removeLink(pl)
	}()
	n.onLinkUp(pl)
}

// carryClaims keeps what the peer said of itself on the link it replaces
// (its name and listen addresses) when the new link is one this node
// dialled to the same peer process: a responder's handshake payload
// carries neither (PROTOCOL.md §12.2), so a link moved to the peer's Unix
// socket, or won by this node's dial, would otherwise lose them.
func carryClaims(p *proto.HandshakePayload, l *transport.Link, old *peerLink) *proto.HandshakePayload {
	if old.payload == nil || p.Name != "" || len(p.Listen) > 0 || !l.Outbound() || !bytes.Equal(old.link.PeerStatic(), l.PeerStatic()) {
		return p
	}
	cp := *p
	cp.Name, cp.Listen = old.payload.Name, old.payload.Listen
	return &cp
}

// preferLink decides which of two links to the same peer survives, old
// being the registered one. A peer process keeps one Noise static key for
// its lifetime, so links that show different static keys come from
// different processes: the peer restarted, old is a leftover its previous
// process could not close, and the new link wins. Otherwise both ends
// decide alike: the link dialled by the lower NodeID wins, and two links in
// the same direction (a race of one dialler) keep the one with the lower
// Noise session id (the handshake hash), which both ends share. Before
// those, a Unix link both ends agreed to move to wins over the TCP link
// (see unixmove.go). The caller holds the peers mutex.
// moved says the move agreement decided.
func (n *Node) preferLink(p *peer, old, l *transport.Link) (keep *transport.Link, moved bool) {
	if !bytes.Equal(old.PeerStatic(), l.PeerStatic()) {
		return l, false
	}
	if keepNew, ok := movedLocked(p, old.Network(), l.Network(), time.Now()); ok {
		if keepNew {
			return l, true
		}
		return old, true
	}
	return n.tieBreak(old, l), false
}

func (n *Node) tieBreak(a, b *transport.Link) *transport.Link {
	if a.Outbound() != b.Outbound() {
		selfLower := n.id.Pub.NodeID().Less(a.PeerKey().NodeID())
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

func (n *Node) removeLink(pl *peerLink) {
	n.peers.Lock()
	if p := n.peers.byKey[pl.key]; p != nil && p.link == pl {
		p.link = nil
		now := time.Now()
		if pl.refused.Load() || !n.isMember() || silentlyRefused(pl) {
			// The peer turned us away: back off as from a failed dial.
			p.refusals++
			p.next = now.Add(refusedBackoff(p.refusals))
			if n.removedSelf() {
				p.next = now.Add(removedRetryDelay())
			}
			n.metrics.inc(cDialRefused)
		} else {
			// Redial soon: a dropped link is usually a restart or a blip.
			p.refusals = 0
			p.next = now.Add(n.backoff(0))
		}
		for _, s := range n.peers.seeds {
			if s.key.Equal(pl.key) && s.next.Before(p.next) {
				s.next = p.next
			}
		}
		if _, member := n.Roster().Member(pl.key); !member {
			delete(n.peers.byKey, pl.key)
		}
	}
	closed := n.peers.closed
	n.peers.Unlock()
	n.pxChanged()
	n.linkClosed(pl)
	n.metrics.inc(cLinkDown)
	n.metrics.inc(cLinkDownBy.at(downReason(pl.link.Err())))
	if !closed {
		n.log.Info("link down", "peer", pl.key.Fingerprint(), "name", pl.payload.Name, "reason", errString(pl.link.Err()))
		n.wake()
	}
}

// downReason classes why a link ended, for the "link.down.<class>"
// counters.
func downReason(err error) linkDown {
	switch {
	case err == nil, errors.Is(err, transport.ErrClosed):
		return linkDownClosed
	case errors.Is(err, transport.ErrSlowReader):
		return linkDownSlowReader
	case errors.Is(err, transport.ErrTimeout):
		return linkDownTimeout
	}
	return linkDownError
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// closeLinkAsync closes a link without waiting on the caller's goroutine,
// which may be the link's own reader.
func (n *Node) closeLinkAsync(pl *peerLink, reason string) {
	if !pl.sayGoodbye(reason) {
		return // closing already: a goodbye is not answered twice
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		// Give the writer a moment to flush the goodbye.
		select {
		case <-pl.link.Done():
		case <-time.After(200 * time.Millisecond):
		}
		_ = pl.link.Close()
	}()
}

func (n *Node) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// backoff returns the redial delay after fails consecutive failures:
// exponential between the configured bounds, drawn from [d/2, d].
func (n *Node) backoff(fails int) time.Duration {
	d := n.cfg.DialBackoffMin
	for i := 0; i < fails && d < n.cfg.DialBackoffMax; i++ {
		d *= 2
	}
	d = min(d, n.cfg.DialBackoffMax)
	return time.Duration(float64(d) * (0.5 + 0.5*rand.Float64()))
}

// dialIdleWait bounds the dialler's sleep when nothing is due sooner.
const dialIdleWait = 5 * time.Second

func (n *Node) dialLoop() {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		// Sleep until the next dial is due, or something changes: a
		// node with a full mesh wakes every dialIdleWait, not five times
		// a second.
		wait := min(max(time.Until(n.dialDue()), 10*time.Millisecond), dialIdleWait)
		t.Reset(wait)
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
	}
}

// dialDue starts a dial of every member and seed that is due: not linked,
// not being dialled, its backoff over. It returns when the next one not
// started is due (far ahead when none is waiting; soon when dials in
// flight hold it back).
func (n *Node) dialDue() time.Time {
	now := time.Now()
	next := now.Add(dialIdleWait)
	n.peers.Lock()
	defer n.peers.Unlock()
	if n.peers.closed {
		return next
	}
	dialing := n.dialsLocked()
	for _, p := range n.peers.byKey {
		if p.link != nil {
			if at := n.askMoveLocked(p, now); !at.IsZero() && at.Before(next) {
				next = at
			}
			continue
		}
		if p.dialing || len(p.addrs) == 0 {
			continue
		}
		if now.Before(p.next) {
			if p.next.Before(next) {
				next = p.next
			}
			continue
		}
		if n.spreadFirstDialLocked(p, now) {
			if p.next.Before(next) {
				next = p.next
			}
			continue
		}
		if dialing >= maxDials {
			// The rest when these are done (removeLink and dialPeer
			// wake the loop).
			next = now.Add(50 * time.Millisecond)
			break
		}
		dialing++
		n.startDialLocked(p, n.orderAddrs(p.addrs))
	}
	for _, s := range n.peers.seeds {
		if s.dialing {
			continue
		}
		if now.Before(s.next) {
			if s.next.Before(next) {
				next = s.next
			}
			continue
		}
		if !s.key.IsZero() {
			if m := n.peers.byKey[s.key]; m != nil && (m.link != nil || m.dialing) {
				continue
			}
		}
		n.startDialLocked(s, s.addrs)
	}
	return next
}

// startDialLocked marks p as being dialled and starts the dial.
func (n *Node) startDialLocked(p *peer, addrs []transport.Addr) {
	p.dialing = true
	n.wg.Add(1)
	go n.dialPeer(p, p.key, addrs)
}

// dialPeer tries addrs in order until one links, expecting key (none when
// zero), then updates p's backoff. key is p's key as the caller read it
// under the peers mutex. A seed whose address now hosts another member (a
// reinstall) is dialled again without expectation, and learns the key.
func (n *Node) dialPeer(p *peer, key proto.PubKey, addrs []transport.Addr) {
	defer n.wg.Done()
	var expect *proto.PubKey
	if !key.IsZero() {
		expect = &key
	}
	var l *transport.Link
	var err error
	var failed []transport.Addr
	var why []dialFailure
	var linked transport.Addr
	for _, a := range addrs {
		l, err = n.dial(a, expect)
		if err != nil && p.seed && expect != nil && errors.Is(err, transport.ErrUnexpectedPeer) {
			l, err = n.dial(a, nil)
		}
		if err == nil {
			linked = a
			break
		}
		failed = append(failed, a)
		why = append(why, dialFailure{addr: a, err: err})
	}
	if err == nil {
		// Registered before dialing is cleared, so that dialDue does not
		// start a second dial of a peer just linked.
		n.addLink(l)
	} else if p.seed {
		// A seed of another org: knock to be listed there (knock.go).
		n.knockSeed(why)
	}
	var fm *formerMemberError
	var gone string
	n.peers.Lock()
	p.dialing = false
	if p.seed && errors.As(err, &fm) {
		gone = n.dropSeedLocked(p)
	}
	n.dialResultLocked(p, failed, linked)
	p.lastDial = nil
	if err != nil {
		p.lastDial = why
		p.fails++
		p.next = time.Now().Add(n.backoff(p.fails))
		if n.removedSelf() {
			p.next = time.Now().Add(removedRetryDelay())
		}
	} else {
		p.fails = 0
		if p.seed {
			p.key = l.PeerKey()
			// The link may be down already (a refusal): the seed waits
			// as long as the member it reached.
			if m := n.peers.byKey[p.key]; m != nil && m.link == nil && m.next.After(p.next) {
				p.next = m.next
			}
		}
	}
	fails := p.fails
	n.peers.Unlock()
	if gone != "" {
		n.seedsGone([]string{gone})
		return
	}
	n.wake() // a place for a dial held back by maxDials
	if err == nil {
		return
	}
	if !p.seed {
		n.log.Debug("dial failed", "peer", key.Fingerprint(), "err", err)
		return
	}
	n.metrics.inc(cDialSeedFailed)
	lvl := n.log.Debug
	if fails == 1 || fails%10 == 0 {
		lvl = n.log.Warn
	}
	lvl("seed dial failed", "seed", addrs[0].String(), "fails", fails, "err", err)
}

func (n *Node) dial(a transport.Addr, expect *proto.PubKey) (*transport.Link, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	n.metrics.inc(cDialAttempt)
	l, err := transport.Dial(ctx, a, n.linkCfg, expect)
	if err != nil {
		n.metrics.inc(cDialFailed)
		return nil, err
	}
	return l, nil
}

// orderAddrs puts the addresses to try first first: a Unix socket when
// the peer is on this host (it advertises an address we also hold), then
// TCP addresses. Unix sockets of other hosts are skipped.
func (n *Node) orderAddrs(addrs []transport.Addr) []transport.Addr {
	local := false
	var unix, tcp []transport.Addr
	for _, a := range addrs {
		switch a.Network {
		case "unix":
			unix = append(unix, a)
		case "tcp":
			tcp = append(tcp, a)
			if isLocalHostPort(a.Address) {
				local = true
			}
		}
	}
	if !local && len(tcp) > 0 {
		return tcp
	}
	return append(unix, tcp...)
}

var localIPs = func() func() map[string]bool {
	var cached map[string]bool
	var at time.Time
	return func() map[string]bool {
		if cached != nil && time.Since(at) < 10*time.Second {
			return cached
		}
		m := map[string]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					m[ipn.IP.String()] = true
				}
			}
		}
		cached, at = m, time.Now()
		return m
	}
}()

func isLocalHostPort(hp string) bool {
	h, _, err := net.SplitHostPort(hp)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return false
	}
	return ip.IsLoopback() || localIPs()[ip.String()]
}

// advertiseAddrs turns bound listen addresses into what peers should dial:
// a wildcard TCP address becomes one address per non-loopback interface
// IP (loopback only when there is nothing else).
func advertiseAddrs(lns []*transport.Listener) []string {
	var out []string
	for _, ln := range lns {
		a := ln.Addr()
		if a.Network != "tcp" {
			out = append(out, a.String())
			continue
		}
		h, port, err := net.SplitHostPort(a.Address)
		if err != nil {
			continue
		}
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsUnspecified() {
			out = append(out, a.String())
			continue
		}
		var ext, lo []string
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, ia := range addrs {
				ipn, ok := ia.(*net.IPNet)
				if !ok || ipn.IP.IsLinkLocalUnicast() {
					continue
				}
				if ip.To4() != nil && ipn.IP.To4() == nil {
					continue
				}
				s := transport.Addr{Network: "tcp", Address: net.JoinHostPort(ipn.IP.String(), port)}.String()
				if ipn.IP.IsLoopback() {
					lo = append(lo, s)
				} else {
					ext = append(ext, s)
				}
			}
		}
		if len(ext) == 0 {
			ext = lo
		}
		out = append(out, ext...)
	}
	if len(out) > proto.MaxListenAddrs {
		out = out[:proto.MaxListenAddrs]
	}
	return out
}

func (n *Node) discoveryLoop() {
	defer n.wg.Done()
	ch := n.disc.Peers()
	for {
		select {
		case <-n.ctx.Done():
			return
		case p, ok := <-ch:
			if !ok {
				return
			}
			if p.Org != n.linkCfg.Org {
				n.sawForeignOrg(p.Org, p.Key)
				if !p.Key.Equal(n.id.Pub) && p.ProtoVersion == proto.ProtocolVersion {
					n.knockMDNS(p.Addrs)
				}
				continue
			}
			if p.Key.Equal(n.id.Pub) {
				continue
			}
			if p.ProtoVersion != proto.ProtocolVersion {
				n.metrics.inc(cMDNSIgnoredVersion)
				continue
			}
			n.peers.Lock()
			_, member := n.Roster().Member(p.Key)
			ignored := 0
			if member {
				ignored, _ = n.mergeAddrsLocked(p.Key, p.Addrs, addrGossip)
			}
			n.peers.Unlock()
			if ignored > 0 {
				n.metrics.add(cAddrIgnored, uint64(ignored))
			}
			if !member {
				n.metrics.inc(cMDNSIgnoredNotMember)
				n.log.Debug("mdns peer not in roster", "peer", p.Key.Fingerprint())
				continue
			}
			n.metrics.inc(cMDNSSeen)
			n.wake()
		}
	}
}

func (n *Node) exchangeLoop() {
	defer n.wg.Done()
	// Rounds fall on multiples of the interval on the clock, so that the
	// digests a node receives from all its peers arrive together: one
	// wake-up, not one per peer (see transport's keepaliveGrid).
	iv := n.cfg.PeerExchangeInterval
	t := time.NewTimer(alignedDelay(time.Now(), iv))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.px.dirty:
			// Let changes gather, then send them (peerupdate.go).
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(pxBatchFor(n.linkCount())):
			}
			n.pxSend(n.linkList(), false)
		case <-t.C:
			t.Reset(alignedDelay(time.Now(), iv))
			links := n.linkList()
			n.pxSend(links, true)
			for _, pl := range links {
				n.flushQueue(pl) // re-send what the peer has not acknowledged
			}
		}
	}
}

func (n *Node) sendFrame(pl *peerLink, t proto.FrameType, payload []byte) {
	f := make([]byte, 0, 1+len(payload))
	f = append(f, byte(t))
	f = append(f, payload...)
	err := pl.link.Send(f)
	if errors.Is(err, transport.ErrClosed) && rehomed(t) {
		// The link lost a duplicate pair since it was picked (a move to
		// a Unix socket, say): the frames that move to the winner of a
		// pair go on the peer's link now, as in fanOut.
		n.peers.Lock()
		cur := n.linkedLocked(pl.key)
		n.peers.Unlock()
		if cur != nil && cur != pl {
			err = cur.link.Send(f)
		}
	}
	if err != nil {
		n.metrics.inc(cSendDropped.of(t))
		n.log.Debug("send failed", "peer", pl.key.Fingerprint(), "frame", t.String(), "err", err)
	}
}

// onLinkUp runs once per new link: push our roster if it is newer, and
// share the peers we know.
func (n *Node) onLinkUp(pl *peerLink) {
	r := n.Roster()
	if r.Version > pl.payload.RosterVersion {
		n.pushRoster(pl, r)
	}
	n.pxLinkUp(pl)
	n.sendPolicyDigest(pl)
	n.sendPresenceTo(pl)
	n.sendCardsTo(pl)
	n.flushQueue(pl)
	n.syncer.onLinkUp(pl)
	n.attach.onLinkUp()
}

func (n *Node) handleFrame(pl *peerLink, frame []byte) {
	n.presence.Touch(pl.key, time.Now())
	if len(frame) == 0 {
		n.metrics.inc(cFrameEmpty)
		return
	}
	payload := frame[1:]
	n.metrics.frameIn(proto.FrameType(frame[0]), len(frame))
	switch t := proto.FrameType(frame[0]); t {
	case proto.FrameRoster:
		n.handleRoster(pl, payload)
	case proto.FramePeers:
		n.handlePeers(pl, payload)
	case proto.FramePeerUpdate:
		if n.test.oldPeerExchange() {
			n.metrics.inc(cFrameUnknown) // as a node without them
			return
		}
		n.handlePeerUpdate(pl, payload)
	case proto.FrameGoodbye:
		if pl.link.Outbound() && time.Since(pl.link.Established()) < refusedWithin {
			pl.refused.Store(true)
		}
		n.logRL.log(n.log, "peer said goodbye", pl.key.Fingerprint(), "goodbye",
			"peer", pl.key.Fingerprint(), "reason", sanitize(payload))
		if n.awaitMove(pl) {
			return // the Unix link that retires pl is on its way (unixmove.go)
		}
		n.closeLinkAsync(pl, "goodbye")
	case proto.FrameEnvelope:
		n.receive(payload, rxSource{link: pl})
	case proto.FramePolicy:
		n.handlePolicy(pl, payload)
	case proto.FramePolicyDigest:
		n.handlePolicyDigest(pl, payload)
	case proto.FrameAck:
		n.handleAck(pl, payload)
	case proto.FrameCard:
		n.handleCard(pl, payload)
	case proto.FrameLinkMove:
		if n.test.oldLinkMoves() {
			n.metrics.inc(cFrameUnknown) // as a node without them
			return
		}
		n.handleLinkMove(pl, payload)
	case proto.FramePresenceNote:
		n.receivePresenceNote(pl, payload)
	case proto.FrameBlobWant:
		n.attach.handleWant(pl, payload)
	case proto.FrameBlobChunk:
		n.attach.handleChunk(pl, payload)
	default:
		n.metrics.inc(cFrameUnknown)
		n.logRL.debug(n.log, "unhandled frame", pl.key.Fingerprint(), "frame.unknown", "peer", pl.key.Fingerprint(), "type", t.String(), "len", len(payload))
	}
}

func (n *Node) handlePeers(pl *peerLink, payload []byte) {
	list, err := proto.ParsePeerList(payload)
	if err != nil {
		n.metrics.inc(cPeersMalformed)
		n.logRL.warn(n.log, "bad peer list", pl.key.Fingerprint(), "peers.malformed", "peer", pl.key.Fingerprint(), "err", err)
		return
	}
	if list.IgnoredAddrs > 0 {
		n.metrics.add(cAddrIgnored, uint64(list.IgnoredAddrs))
	}
	n.pxViewReplace(pl, list.Peers)
	n.takePeerAddrs(pl, list.Peers)
}

// takePeerAddrs records the addresses of a peers or peer-update frame's
// entries from pl, under the rules of addrs.go.
func (n *Node) takePeerAddrs(pl *peerLink, entries []proto.PeerInfo) {
	added, selfChanged := false, false
	ignored := 0
	n.peers.Lock()
	for _, p := range entries {
		// Only roster members' addresses are taken (receive step 4).
		if _, ok := n.Roster().Member(p.Key); !ok {
			n.metrics.inc(cPeersIgnoredNotMember)
			continue
		}
		if p.Key.Equal(n.id.Pub) {
			continue
		}
		src := addrGossip
		if p.Key.Equal(pl.key) {
			// The peer's own entry: its claim about itself.
			src = selfSource(pl.link)
			selfChanged = !slices.Equal(pl.listenAddrs(), p.Addrs)
			pl.setListen(p.Addrs)
		}
		ign, add := n.mergeAddrsLocked(p.Key, p.Addrs, src)
		ignored += ign
		added = added || add > 0
	}
	n.peers.Unlock()
	if ignored > 0 {
		n.metrics.add(cAddrIgnored, uint64(ignored))
	}
	if selfChanged {
		n.pxChanged()
	}
	if added {
		n.wake() // a new address to dial; known ones need no dial round
	}
}

func sanitize(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// selfSource is the source of addresses a member claims for itself on l:
// local when the link runs on a Unix socket or comes from an address of
// this host.
func selfSource(l *transport.Link) addrSource {
	if l.Network() == "unix" || isLocalHostPort(l.RemoteAddr()) {
		return addrSelfLocal
	}
	return addrSelf
}
