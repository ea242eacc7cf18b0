package node

import (
	"errors"
	"time"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	famRekeys = newFamily("meshd_key_rotations_total", "Key rotations: member (a roster update moved a member to a new key), switched (this node took its new key at start), restart_needed (the roster lists this node's new key; restart meshd).", "event")

	cRekeySwitched      = newCounter("rekey.switched", famRekeys, "switched")
	cRekeyMember        = newCounter("rekey.member", famRekeys, "member")
	cRekeyRestartNeeded = newCounter("rekey.restart_needed", famRekeys, "restart_needed")
	cLinkRetiredKey     = newCounter("link.retired_key", famLinkEvents, "retired_key")
)

// rekeyState is what a key rotation needs of the node: a wake-up for the
// loop that closes links by previous keys when their window ends, and
// whether this start switched to a new key.
type rekeyState struct {
	changed chan struct{} // a roster was applied: re-arm the timer
	// switched: setup adopted the pending key; the send counters start a
	// new epoch under it. prev is the key it replaced.
	switched bool
	prev     proto.PubKey
}

func newRekeyState() *rekeyState { return &rekeyState{changed: make(chan struct{}, 1)} }

// adoptPendingKey switches the identity to the pending key made by
// `meshctl rekey` when r lists it as a member's key. Called by setup
// before anything uses the identity.
func (n *Node) adoptPendingKey(r *roster.Roster) error {
	next, err := n.home.LoadNextKey()
	if errors.Is(err, home.ErrNoNextKey) {
		return nil
	}
	if err != nil {
		return err
	}
	pub := proto.PubKeyOf(next)
	if m, ok := r.Member(pub); !ok || m.Key != pub {
		n.log.Info("a new key waits until the roster lists it; an admin runs `meshctl roster rekey` with it",
			"key", pub.String(), "fingerprint", pub.Fingerprint(), "file", n.home.NextKeyPath())
		return nil
	}
	old := n.id
	id, err := n.home.AdoptNextKey()
	if err != nil {
		return err
	}
	if id.Name == "" {
		id.Name = old.Name
	}
	n.id = id
	n.rekey.switched, n.rekey.prev = true, old.Pub
	n.metrics.inc(cRekeySwitched)
	n.log.Info("switched to the new key the roster lists", "key", id.Pub.String(), "fingerprint", id.Pub.Fingerprint(),
		"previous", old.Pub.Fingerprint(), "previous_file", n.home.PrevKeyPath())
	return nil
}

// rosterRekeyed is called by applyRoster after cur was replaced by r: it
// wakes the retirement timer, carries this node's blocks over to members'
// new keys, and tells the operator when r lists this node's pending key.
func (n *Node) rosterRekeyed(cur, r *roster.Roster) {
	select {
	case n.rekey.changed <- struct{}{}:
	default:
	}
	for _, m := range r.Members {
		if m.PrevKey.IsZero() {
			continue
		}
		if _, was := cur.Member(m.Key); was {
			continue // an earlier update made this rotation
		}
		n.metrics.inc(cRekeyMember)
		n.log.Info("member moved to a new key", "name", m.Name, "key", m.Key.Fingerprint(),
			"previous", m.PrevKey.Fingerprint(), "previous_until", time.UnixMilli(m.PrevUntil).UTC())
		if n.blocks != nil && n.blocks.has(m.PrevKey) && !n.blocks.has(m.Key) {
			if _, err := n.blocks.set(m.Key, true); err != nil {
				n.log.Warn("block a member's new key", "member", m.Label(), "err", err)
			}
		}
	}
	next, err := n.home.LoadNextKey()
	if err != nil {
		return
	}
	pub := proto.PubKeyOf(next)
	if m, ok := r.Member(pub); ok && m.Key == pub {
		until := "now"
		if mine, ok := r.Previous(n.id.Pub); ok && mine.Key == pub {
			until = time.UnixMilli(mine.PrevUntil).UTC().Format(time.RFC3339)
		}
		n.metrics.inc(cRekeyRestartNeeded)
		n.log.Warn("the roster lists this node's new key: restart meshd to switch to it; the current key is accepted until "+until,
			"key", pub.Fingerprint(), "version", r.Version)
	}
}

// rekeyLoop closes the links and forgets the peers of previous keys when
// their grace window ends, by this machine's clock.
func (n *Node) rekeyLoop() {
	defer n.wg.Done()
	if n.rekey.switched {
		n.cards.Carry(n.rekey.prev)
	}
	for {
		var fire <-chan time.Time
		var t *time.Timer
		if d, ok := n.Roster().NextPrevDeadline(time.Now()); ok {
			t = time.NewTimer(time.Until(d))
			fire = t.C
		}
		select {
		case <-n.ctx.Done():
		case <-n.rekey.changed:
		case <-fire:
			n.retireExpiredKeys()
		}
		if t != nil {
			t.Stop()
		}
		if n.ctx.Err() != nil {
			return
		}
	}
}

// retireExpiredKeys closes every link, and forgets every peer, whose key
// the roster no longer accepts as a member's previous key.
func (n *Node) retireExpiredKeys() {
	r := n.Roster()
	var drop []*peers.Link
	n.peers.Lock()
	for k, p := range n.peers.ByKey {
		if _, ok := r.Member(k); ok {
			continue
		}
		if _, prev := r.Previous(k); !prev {
			continue
		}
		p.Addrs.Clear()
		if p.Link == nil {
			delete(n.peers.ByKey, k)
		} else {
			drop = append(drop, p.Link)
		}
	}
	n.peers.Unlock()
	for _, pl := range drop {
		n.metrics.inc(cLinkRetiredKey)
		n.log.Info("closing the link of a member's previous key: its grace window ended", "peer", pl.Key.Fingerprint(),
			"member", r.Label(pl.Key))
		n.peers.CloseAsync(pl, "previous key retired")
	}
}

// senderRefusal names why the roster refuses k as a sender: a previous key
// past its window, or a stranger.
func senderRefusal(r *roster.Roster, k proto.PubKey) dropReason {
	if _, ok := r.Previous(k); ok {
		return dropRetiredKey
	}
	return dropNotMember
}

// ownPreviousKey reports whether k is this node's previous key in r: an
// envelope addressed to it (sent before the sender learnt of the
// rotation) is for this node.
func (n *Node) ownPreviousKey(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(n.id.Pub)
	return ok && m.Key == n.id.Pub && !m.PrevKey.IsZero() && m.PrevKey == k
}

// previousKeyOf returns the previous key of the member whose key is k, for
// queues kept under that key before the rotation.
func previousKeyOf(r *roster.Roster, k proto.PubKey) (proto.PubKey, bool) {
	m, ok := r.Member(k)
	if !ok || m.Key != k || m.PrevKey.IsZero() {
		return proto.PubKey{}, false
	}
	return m.PrevKey, true
}

// sameMember reports whether asked and from are one member's keys across
// a rotation: a Response from the new key answers a Request sent to the
// old one, and the other way round inside the window.
func sameMember(r *roster.Roster, asked, from proto.PubKey) bool {
	m, ok := r.Member(from)
	return ok && (m.Key == asked || (!m.PrevKey.IsZero() && m.PrevKey == asked))
}
