package node

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/meshd/meshd/node/peers"
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

// addLink registers an admitted link, resolving duplicates so that each
// peer pair keeps exactly one link, and starts serving it.
func (n *Node) addLink(l *transport.Link) {
	if n.refuseSlow(l) {
		return
	}
	key := l.PeerKey()
	pl := peers.NewLink(l)
	n.peers.Lock()
	if n.peers.Closed {
		n.peers.Unlock()
		_ = l.Close()
		return
	}
	if _, ok := n.Roster().Member(key); !ok {
		// The roster changed between the handshake and now.
		n.peers.Unlock()
		n.metrics.inc(cLinkRejectedNotMember)
		_ = l.Send(peers.GoodbyeFrame("not a member of the current roster"))
		_ = l.Close()
		return
	}
	var loser, deferred *peers.Link
	p := n.peers.MemberLocked(key)
	if old := p.Link; old != nil {
		keep, moved := n.preferLink(p, old.Conn, l)
		if keep == old.Conn {
			n.peers.Unlock()
			n.metrics.inc(cLinkDuplicate)
			n.log.Debug("duplicate link closed", "peer", key.Fingerprint(), "addr", l.RemoteAddr())
			n.retireNewLoser(pl)
			return
		}
		loser = old
		pl.Payload = peers.CarryClaims(pl.Payload, l, old)
		if moved && l.Outbound() {
			deferred = old // retired once the peer has taken l (unixmove.go)
		} else {
			n.retireLoser(old, pl) // before pl is published: its frames go first
		}
	}
	p.Link = pl
	p.Fails = 0
	p.Spread = true // linked: later dials are redials
	for _, s := range n.peers.Seeds {
		if !s.Dialing && s.Key.Equal(key) {
			s.Fails = 0
		}
	}
	ignored, _ := n.mergeAddrsLocked(key, pl.Payload.Listen, peers.SelfSource(l))
	n.peers.Unlock()
	if pl.Payload.IgnoredListen+ignored > 0 {
		n.metrics.add(cAddrIgnored, uint64(pl.Payload.IgnoredListen+ignored))
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
	n.log.Info("link up", "peer", key.Fingerprint(), "name", pl.Payload.Name, "addr", l.RemoteAddr(),
		"network", l.Network(), "dir", dir, "peer_roster", pl.Payload.RosterVersion)

	l.Start(n.frameHandler(pl, deferred))
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-l.Done()
		n.removeLink(pl)
	}()
	n.onLinkUp(pl)
}

// preferLink decides which of two links to the same peer survives, old
// being the registered one (the rule is in peers/duplink.go): a link from
// a new peer process wins; then a Unix link both ends agreed to move to
// wins over the TCP link (see unixmove.go); then peers.TieBreak. The
// caller holds the peers mutex. moved says the move agreement decided.
func (n *Node) preferLink(p *peers.Peer, old, l *transport.Link) (keep *transport.Link, moved bool) {
	if !peers.SameProcess(old, l) {
		return l, false
	}
	if keepNew, ok := movedLocked(p, old.Network(), l.Network(), time.Now()); ok {
		if keepNew {
			return l, true
		}
		return old, true
	}
	return peers.TieBreak(n.id.Pub.NodeID(), old, l), false
}

func (n *Node) removeLink(pl *peers.Link) {
	// Under the peers mutex, as roster updates swap the roster: the
	// member check agrees with the table.
	n.peers.Lock()
	_, member := n.Roster().Member(pl.Key)
	down := peers.LinkDown{
		Refused: pl.Refused.Load() || !n.isMember() || peers.SilentlyRefused(pl.Conn),
		Removed: n.removedSelf(),
		Member:  member,
		Redial:  n.dialBackoff(0),
	}
	refused := n.peers.LinkDownLocked(pl, down, time.Now())
	closed := n.peers.Closed
	n.peers.Unlock()
	if refused {
		n.metrics.inc(cDialRefused)
	}
	n.pxChanged()
	n.linkClosed(pl)
	n.metrics.inc(cLinkDown)
	n.metrics.inc(cLinkDownBy.at(downReason(pl.Conn.Err())))
	if !closed {
		n.log.Info("link down", "peer", pl.Key.Fingerprint(), "name", pl.Payload.Name, "reason", errString(pl.Conn.Err()))
		n.wake()
	}
}

// closeLinkAsync closes a link without waiting on the caller's goroutine,
// which may be the link's own reader.
func (n *Node) closeLinkAsync(pl *peers.Link, reason string) {
	if !pl.SayGoodbye(reason) {
		return // closing already: a goodbye is not answered twice
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		// Give the writer a moment to flush the goodbye.
		select {
		case <-pl.Conn.Done():
		case <-time.After(200 * time.Millisecond):
		}
		_ = pl.Conn.Close()
	}()
}

func (n *Node) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// dialBackoff returns the redial delay after fails consecutive
// failures, between the configured bounds (peers.Backoff).
func (n *Node) dialBackoff(fails int) time.Duration {
	return peers.Backoff(n.cfg.DialBackoffMin, n.cfg.DialBackoffMax, fails)
}

func (n *Node) dialLoop() {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		// Sleep until the next dial is due, or something changes.
		wait := min(max(time.Until(n.dialDue()), 10*time.Millisecond), peers.DialIdleWait)
		t.Reset(wait)
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
	}
}

// dialDue starts a dial of every member and seed that is due (see
// peers.Table.DueLocked) and returns when the next one is due.
func (n *Node) dialDue() time.Time {
	n.peers.Lock()
	defer n.peers.Unlock()
	return n.peers.DueLocked(time.Now(), n.id.Pub.NodeID(), len(n.Roster().Members),
		peers.DialHooks{AskMove: n.askMoveLocked, Start: n.startDialLocked})
}

// startDialLocked marks p as being dialled and starts the dial.
func (n *Node) startDialLocked(p *peers.Peer, addrs []transport.Addr) {
	p.Dialing = true
	n.wg.Add(1)
	go n.dialPeer(p, p.Key, addrs)
}

// dialPeer tries addrs in order until one links, expecting key (none when
// zero), then updates p's backoff. key is p's key as the caller read it
// under the peers mutex. A seed whose address now hosts another member (a
// reinstall) is dialled again without expectation, and learns the key.
func (n *Node) dialPeer(p *peers.Peer, key proto.PubKey, addrs []transport.Addr) {
	defer n.wg.Done()
	var expect *proto.PubKey
	if !key.IsZero() {
		expect = &key
	}
	var l *transport.Link
	var err error
	var why []peers.DialFailure
	var linked transport.Addr
	for _, a := range addrs {
		l, err = n.dial(a, expect)
		if err != nil && p.Seed && expect != nil && errors.Is(err, transport.ErrUnexpectedPeer) {
			l, err = n.dial(a, nil)
		}
		if err == nil {
			linked = a
			break
		}
		why = append(why, peers.DialFailure{Addr: a, Err: err})
	}
	if err == nil {
		// Registered before dialing is cleared, so that dialDue does not
		// start a second dial of a peer just linked.
		n.addLink(l)
	} else if p.Seed {
		// A seed of another org: knock to be listed there (knock.go).
		n.knockSeed(why)
	}
	var fm *formerMemberError
	var gone string
	done := peers.DialDone{Failed: why, LinkedAddr: linked, Backoff: n.dialBackoff, Removed: n.removedSelf()}
	if err == nil {
		done.Linked = l
	}
	n.peers.Lock()
	if p.Seed && errors.As(err, &fm) {
		gone = n.dropSeedLocked(p)
	}
	evicted := n.peers.DialDoneLocked(p, done, time.Now())
	fails := p.Fails
	n.peers.Unlock()
	if evicted > 0 {
		n.metrics.add(cAddrEvicted, uint64(evicted))
	}
	if gone != "" {
		n.seedsGone([]string{gone})
		return
	}
	n.wake() // a place for a dial held back by peers.MaxDials
	if err == nil {
		return
	}
	if !p.Seed {
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
				ignored, _ = n.mergeAddrsLocked(p.Key, p.Addrs, peers.Gossip)
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
		case <-n.peers.List.Dirty:
			// Let changes gather, then send them (peerupdate.go).
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(peers.BatchFor(n.linkCount())):
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

func (n *Node) sendFrame(pl *peers.Link, t proto.FrameType, payload []byte) {
	f := make([]byte, 0, 1+len(payload))
	f = append(f, byte(t))
	f = append(f, payload...)
	err := pl.Conn.Send(f)
	if errors.Is(err, transport.ErrClosed) && peers.Rehomed(t) {
		// The link lost a duplicate pair since it was picked (a move to
		// a Unix socket, say): the frames that move to the winner of a
		// pair go on the peer's link now, as in fanOut.
		n.peers.Lock()
		cur := n.peers.LinkedLocked(pl.Key)
		n.peers.Unlock()
		if cur != nil && cur != pl {
			err = cur.Conn.Send(f)
		}
	}
	if err != nil {
		n.metrics.inc(cSendDropped.of(t))
		n.log.Debug("send failed", "peer", pl.Key.Fingerprint(), "frame", t.String(), "err", err)
	}
}

// onLinkUp runs once per new link: push our roster if it is newer, and
// share the peers we know.
func (n *Node) onLinkUp(pl *peers.Link) {
	r := n.Roster()
	if r.Version > pl.Payload.RosterVersion {
		n.pushRoster(pl, r)
	}
	n.pxLinkUp(pl)
	n.sendPolicyDigest(pl)
	n.sendPresenceTo(pl)
	n.sendCardsTo(pl)
	n.flushQueue(pl)
	n.syncer.OnLinkUp(pl)
}

func (n *Node) handleFrame(pl *peers.Link, frame []byte) {
	n.presence.Touch(pl.Key, time.Now())
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
		if pl.Conn.Outbound() && time.Since(pl.Conn.Established()) < peers.RefusedWithin {
			pl.Refused.Store(true)
		}
		n.logRL.log(n.log, "peer said goodbye", pl.Key.Fingerprint(), "goodbye",
			"peer", pl.Key.Fingerprint(), "reason", sanitize(payload))
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
	default:
		n.metrics.inc(cFrameUnknown)
		n.logRL.debug(n.log, "unhandled frame", pl.Key.Fingerprint(), "frame.unknown", "peer", pl.Key.Fingerprint(), "type", t.String(), "len", len(payload))
	}
}

func (n *Node) handlePeers(pl *peers.Link, payload []byte) {
	list, err := proto.ParsePeerList(payload)
	if err != nil {
		n.metrics.inc(cPeersMalformed)
		n.logRL.warn(n.log, "bad peer list", pl.Key.Fingerprint(), "peers.malformed", "peer", pl.Key.Fingerprint(), "err", err)
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
func (n *Node) takePeerAddrs(pl *peers.Link, entries []proto.PeerInfo) {
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
		src := peers.Gossip
		if p.Key.Equal(pl.Key) {
			// The peer's own entry: its claim about itself.
			src = peers.SelfSource(pl.Conn)
			selfChanged = !slices.Equal(pl.ListenAddrs(), p.Addrs)
			pl.SetListen(p.Addrs)
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
