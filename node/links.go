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

// candidate is a roster member we know addresses for and may dial.
type candidate struct {
	key     proto.PubKey
	addrs   []transport.Addr
	fails   int
	next    time.Time // earliest next dial
	dialing bool
}

// seed is a static peer given by address; its key is learnt on first link.
type seed struct {
	addr    transport.Addr
	key     proto.PubKey // zero until a dial succeeded
	fails   int
	next    time.Time
	dialing bool
}

// maxCandidateAddrs bounds what peer exchange and mDNS can make us store.
const maxCandidateAddrs = 8

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
	key := l.PeerKey()
	pl := &peerLink{link: l, key: key, payload: l.Peer()}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = l.Close()
		return
	}
	if _, ok := n.roster.Member(key); !ok {
		// The roster changed between the handshake and now.
		n.mu.Unlock()
		n.metrics.Inc("link.rejected.not_member")
		_ = l.Send(goodbyeFrame("not a member of the current roster"))
		_ = l.Close()
		return
	}
	var loser *peerLink
	if old := n.links[key]; old != nil {
		if n.preferLink(old.link, l) == old.link {
			n.mu.Unlock()
			n.metrics.Inc("link.duplicate")
			n.log.Debug("duplicate link closed", "peer", key.Fingerprint(), "addr", l.RemoteAddr())
			_ = l.Send(goodbyeFrame("duplicate link"))
			_ = l.Close()
			return
		}
		loser = old
	}
	n.links[key] = pl
	if c := n.cands[key]; c != nil {
		c.fails = 0
	}
	for _, s := range n.seeds {
		if s.dialing {
			continue
		}
		if s.key.Equal(key) {
			s.fails = 0
		}
	}
	n.mergeAddrsLocked(key, pl.payload.Listen)
	n.mu.Unlock()
	if pl.payload.IgnoredListen > 0 {
		n.metrics.Add("addr.ignored", uint64(pl.payload.IgnoredListen))
	}
	if loser != nil {
		n.metrics.Inc("link.duplicate")
		_ = loser.link.Send(goodbyeFrame("duplicate link"))
		_ = loser.link.Close()
	}
	n.metrics.Inc("link.up")
	dir := "inbound"
	if l.Outbound() {
		dir = "outbound"
	}
	n.log.Info("link up", "peer", key.Fingerprint(), "name", pl.payload.Name, "addr", l.RemoteAddr(),
		"network", l.Network(), "dir", dir, "peer_roster", pl.payload.RosterVersion)

	l.Start(func(frame []byte) { n.handleFrame(pl, frame) })
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-l.Done()
		n.removeLink(pl)
	}()
	n.onLinkUp(pl)
}

// preferLink decides which of two links to the same peer survives, old
// being the registered one. A peer process keeps one Noise static key for
// its lifetime, so links that show different static keys come from
// different processes: the peer restarted, old is a leftover its previous
// process could not close, and the new link wins. Otherwise both ends
// decide alike: the link dialled by the lower NodeID wins, and two links in
// the same direction (a race of one dialler) keep the one with the lower
// Noise session id (the handshake hash), which both ends share.
func (n *Node) preferLink(old, l *transport.Link) *transport.Link {
	if !bytes.Equal(old.PeerStatic(), l.PeerStatic()) {
		return l
	}
	return n.tieBreak(old, l)
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
	n.mu.Lock()
	if n.links[pl.key] == pl {
		delete(n.links, pl.key)
		// Redial soon: a dropped link is usually a restart or a blip.
		if c := n.cands[pl.key]; c != nil {
			c.next = time.Now().Add(n.backoff(0))
		}
	}
	closed := n.closed
	n.mu.Unlock()
	n.metrics.Inc("link.down")
	if !closed {
		n.log.Info("link down", "peer", pl.key.Fingerprint(), "name", pl.payload.Name, "reason", errString(pl.link.Err()))
		n.wake()
	}
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
	_ = pl.link.Send(goodbyeFrame(reason))
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

// mergeAddrsLocked records addresses a member can be reached at.
func (n *Node) mergeAddrsLocked(key proto.PubKey, addrs []string) {
	if key.Equal(n.id.Pub) {
		return
	}
	if _, ok := n.roster.Member(key); !ok {
		return
	}
	c := n.cands[key]
	if c == nil {
		c = &candidate{key: key}
		n.cands[key] = c
	}
	for _, s := range addrs {
		a, err := transport.ParseAddr(s)
		if err != nil {
			continue
		}
		if slices.Contains(c.addrs, a) {
			continue
		}
		if len(c.addrs) >= maxCandidateAddrs {
			break
		}
		c.addrs = append(c.addrs, a)
	}
}

func (n *Node) dialLoop() {
	defer n.wg.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		n.dialDue()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
	}
}

func (n *Node) dialDue() {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	for _, c := range n.cands {
		if c.dialing || now.Before(c.next) || len(c.addrs) == 0 {
			continue
		}
		if _, linked := n.links[c.key]; linked {
			continue
		}
		c.dialing = true
		addrs := n.orderAddrs(c.addrs)
		n.wg.Add(1)
		go n.dialCandidate(c, addrs)
	}
	for _, s := range n.seeds {
		if s.dialing || now.Before(s.next) {
			continue
		}
		if !s.key.IsZero() {
			if _, linked := n.links[s.key]; linked {
				continue
			}
			if c := n.cands[s.key]; c != nil && c.dialing {
				continue
			}
		}
		s.dialing = true
		n.wg.Add(1)
		go n.dialSeed(s, s.key)
	}
}

func (n *Node) dialCandidate(c *candidate, addrs []transport.Addr) {
	defer n.wg.Done()
	var err error
	for _, a := range addrs {
		var l *transport.Link
		l, err = n.dial(a, &c.key)
		if err == nil {
			n.addLink(l)
			break
		}
	}
	n.mu.Lock()
	c.dialing = false
	if err != nil {
		c.fails++
		c.next = time.Now().Add(n.backoff(c.fails))
	} else {
		c.fails = 0
	}
	n.mu.Unlock()
	if err != nil {
		n.log.Debug("dial failed", "peer", c.key.Fingerprint(), "err", err)
	}
}

// dialSeed dials a seed; known is the key it had last time (zero if none),
// read under n.mu by the caller.
func (n *Node) dialSeed(s *seed, known proto.PubKey) {
	defer n.wg.Done()
	var expect *proto.PubKey
	if !known.IsZero() {
		expect = &known
	}
	l, err := n.dial(s.addr, expect)
	if err != nil && expect != nil && errors.Is(err, transport.ErrUnexpectedPeer) {
		// The seed address now hosts another member (a reinstall): learn it.
		l, err = n.dial(s.addr, nil)
	}
	n.mu.Lock()
	s.dialing = false
	if err != nil {
		s.fails++
		s.next = time.Now().Add(n.backoff(s.fails))
	} else {
		s.fails = 0
		s.key = l.PeerKey()
	}
	fails := s.fails
	n.mu.Unlock()
	if err != nil {
		n.metrics.Inc("dial.seed_failed")
		lvl := n.log.Debug
		if fails == 1 || fails%10 == 0 {
			lvl = n.log.Warn
		}
		lvl("seed dial failed", "seed", s.addr.String(), "fails", fails, "err", err)
		return
	}
	n.addLink(l)
}

func (n *Node) dial(a transport.Addr, expect *proto.PubKey) (*transport.Link, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.DialTimeout)
	defer cancel()
	n.metrics.Inc("dial.attempt")
	l, err := transport.Dial(ctx, a, n.tcfg, expect)
	if err != nil {
		n.metrics.Inc("dial.failed")
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
			if p.Org != n.tcfg.Org || p.Key.Equal(n.id.Pub) {
				continue
			}
			if p.ProtoVersion != proto.ProtocolVersion {
				n.metrics.Inc("mdns.ignored.protocol_version")
				continue
			}
			n.mu.Lock()
			_, member := n.roster.Member(p.Key)
			if member {
				n.mergeAddrsLocked(p.Key, p.Addrs)
			}
			n.mu.Unlock()
			if !member {
				n.metrics.Inc("mdns.ignored.not_member")
				n.log.Debug("mdns peer not in roster", "peer", p.Key.Fingerprint())
				continue
			}
			n.metrics.Inc("mdns.seen")
			n.wake()
		}
	}
}

func (n *Node) exchangeLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.PeerExchangeInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.mu.Lock()
			links := n.linkListLocked()
			n.mu.Unlock()
			for _, pl := range links {
				n.sendPeers(pl)
				n.flushQueue(pl) // re-send what the peer has not acknowledged
			}
		}
	}
}

// sendPeers tells pl the addresses of the other members we are linked to.
func (n *Node) sendPeers(pl *peerLink) {
	n.mu.Lock()
	var list proto.PeerList
	for k, other := range n.links {
		if k.Equal(pl.key) || len(other.payload.Listen) == 0 {
			continue
		}
		list.Peers = append(list.Peers, proto.PeerInfo{Key: k, Addrs: other.payload.Listen})
	}
	n.mu.Unlock()
	if len(list.Peers) == 0 {
		return
	}
	slices.SortFunc(list.Peers, func(a, b proto.PeerInfo) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	b, err := proto.Marshal(&list)
	if err != nil {
		return
	}
	n.sendFrame(pl, proto.FramePeers, b)
}

func (n *Node) sendFrame(pl *peerLink, t proto.FrameType, payload []byte) {
	f := make([]byte, 0, 1+len(payload))
	f = append(f, byte(t))
	f = append(f, payload...)
	if err := pl.link.Send(f); err != nil {
		n.metrics.Inc("send.dropped." + t.String())
		n.log.Debug("send failed", "peer", pl.key.Fingerprint(), "frame", t.String(), "err", err)
	}
}

// onLinkUp runs once per new link: push our roster if it is newer, and
// share the peers we know.
func (n *Node) onLinkUp(pl *peerLink) {
	n.mu.Lock()
	r := n.roster
	n.mu.Unlock()
	if r.Version > pl.payload.RosterVersion {
		n.pushRoster(pl, r)
	}
	n.sendPeers(pl)
	n.sendPolicyDigest(pl)
	n.sendPresenceTo(pl)
	n.flushQueue(pl)
	n.syncOnLinkUp(pl)
}

func (n *Node) handleFrame(pl *peerLink, frame []byte) {
	n.presence.Touch(pl.key, time.Now())
	if len(frame) == 0 {
		n.metrics.Inc("frame.empty")
		return
	}
	payload := frame[1:]
	switch t := proto.FrameType(frame[0]); t {
	case proto.FrameRoster:
		n.handleRoster(pl, payload)
	case proto.FramePeers:
		n.handlePeers(pl, payload)
	case proto.FrameGoodbye:
		n.log.Info("peer said goodbye", "peer", pl.key.Fingerprint(), "reason", sanitize(payload))
		n.closeLinkAsync(pl, "goodbye")
	default:
		n.handleOtherFrame(pl, t, payload)
	}
}

// handleOtherFrame serves the message plane's frames.
func (n *Node) handleOtherFrame(pl *peerLink, t proto.FrameType, payload []byte) {
	switch t {
	case proto.FrameEnvelope:
		n.receive(payload, rxSource{link: pl})
		return
	case proto.FramePolicy:
		n.handlePolicy(pl, payload)
		return
	case proto.FramePolicyDigest:
		n.handlePolicyDigest(pl, payload)
		return
	case proto.FrameAck:
		n.handleAck(pl, payload)
		return
	}
	n.metrics.Inc("frame.unknown")
	n.log.Debug("unhandled frame", "peer", pl.key.Fingerprint(), "type", t.String(), "len", len(payload))
}

func (n *Node) handlePeers(pl *peerLink, payload []byte) {
	list, err := proto.ParsePeerList(payload)
	if err != nil {
		n.metrics.Inc("peers.malformed")
		n.log.Warn("bad peer list", "peer", pl.key.Fingerprint(), "err", err)
		return
	}
	if list.IgnoredAddrs > 0 {
		n.metrics.Add("addr.ignored", uint64(list.IgnoredAddrs))
	}
	n.recordLinkReport(pl.key, list.Peers) // for the status page's link graph
	added := false
	n.mu.Lock()
	for _, p := range list.Peers {
		// Only roster members' addresses are taken (receive step 4).
		if _, ok := n.roster.Member(p.Key); !ok {
			n.metrics.Inc("peers.ignored.not_member")
			continue
		}
		if p.Key.Equal(n.id.Pub) {
			continue
		}
		n.mergeAddrsLocked(p.Key, p.Addrs)
		added = true
	}
	n.mu.Unlock()
	if added {
		n.wake()
	}
}

func sanitize(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.ToValidUTF8(string(b), "?")
}
