package node

import (
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/rostergossip"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport/mdns"
)

// The counters of node/rostergossip.
var (
	famRosterPushed   = newFamily("meshd_roster_pushes_total", "Roster pushes to peers with an older roster.")
	famRosterRejected = newFamily("meshd_roster_updates_rejected_total", "Roster updates rejected, by reason.", "reason")
	famPersistFailed  = newFamily("meshd_persist_failures_total", "Accepted updates that could not be written to the home, by what.", "what")
	famRosterAccepted = newFamily("meshd_roster_updates_accepted_total", "Roster updates accepted from peers.")
	famRekeys         = newFamily("meshd_key_rotations_total", "Key rotations: member (a roster update moved a member to a new key), switched (this node took its new key at start), restart_needed (the roster lists this node's new key; restart meshd).", "event")

	// rosterCounters maps each counter of node/rostergossip to its metric.
	rosterCounters = [rostergossip.NumCounters]counter{
		rostergossip.Pushed:             newCounter("roster.pushed", famRosterPushed),
		rostergossip.Malformed:          newCounter("roster.rejected.malformed", famRosterRejected, "malformed"),
		rostergossip.Rollback:           newCounter("roster.rejected.rollback", famRosterRejected, "rollback"),
		rostergossip.PersistFailed:      newCounter("roster.persist_failed", famPersistFailed, "roster"),
		rostergossip.Accepted:           newCounter("roster.accepted", famRosterAccepted),
		rostergossip.LinkRemovedMember:  newCounter("link.removed_member", famLinkEvents, "removed_member"),
		rostergossip.KeySwitchedAtStart: newCounter("rekey.switched", famRekeys, "switched"),
		rostergossip.MemberRekeyed:      newCounter("rekey.member", famRekeys, "member"),
		rostergossip.RestartNeeded:      newCounter("rekey.restart_needed", famRekeys, "restart_needed"),
		rostergossip.LinkRetiredKey:     newCounter("link.retired_key", famLinkEvents, "retired_key"),
	}
)

// rosterHost is the node as node/rostergossip sees it.
type rosterHost struct{ n *Node }

// newRosterKeeper returns the keeper of n's roster, with no roster yet.
func newRosterKeeper(n *Node) *rostergossip.Keeper {
	return rostergossip.New(rosterHost{n}, n.home, n.log)
}

func (h rosterHost) Self() proto.PubKey                   { return h.n.id.Pub }
func (h rosterHost) Count(c rostergossip.Counter)         { h.n.metrics.inc(rosterCounters[c]) }
func (h rosterHost) Rejected(reason string)               { h.n.metrics.Inc("roster.rejected." + reason) }
func (h rosterHost) CloseLink(pl *peers.Link, why string) { h.n.peers.CloseAsync(pl, why) }
func (h rosterHost) KeySwitched(prev proto.PubKey)        { h.n.cards.Carry(prev) }

func (h rosterHost) SendFrame(pl *peers.Link, t proto.FrameType, payload []byte) {
	h.n.peers.Send(pl, t, payload)
}

func (h rosterHost) Refused(pl *peers.Link, reason string, err error, attrs ...any) {
	fp := pl.Key.Fingerprint()
	args := append(append([]any{"peer", fp}, attrs...), "err", err)
	h.n.logRL.warn(h.n.log, "roster from peer rejected", fp, reason, args...)
}

// Swap makes r current under the peers mutex, so that
// peers.Service.AddLink (which checks membership under it) either sees r
// or has its link in drop.
func (h rosterHost) Swap(cur, r *roster.Roster, store func(), from *peers.Link) (push, drop []*peers.Link) {
	ps := h.n.peers
	ps.NoteRemoved(cur, r)
	ps.Lock()
	store()
	for k, p := range ps.ByKey {
		if _, ok := r.Member(k); !ok {
			// Not dialled again; the entry goes once its link is down.
			p.Addrs.Clear()
			if p.Link == nil {
				delete(ps.ByKey, k)
			} else {
				drop = append(drop, p.Link)
			}
			continue
		}
		if p.Link != nil && p.Link != from {
			push = append(push, p.Link)
		}
	}
	goneSeeds := ps.DropRemovedSeedsLocked(func(k proto.PubKey) bool { _, ok := r.Member(k); return ok })
	ps.Unlock()
	ps.SeedsGone(goneSeeds)
	return push, drop
}

// Retire forgets the peers whose key r accepts only as a previous key
// past its window, and returns their links.
func (h rosterHost) Retire(r *roster.Roster) []*peers.Link {
	var drop []*peers.Link
	ps := h.n.peers
	ps.Lock()
	defer ps.Unlock()
	for k, p := range ps.ByKey {
		if _, ok := r.Member(k); ok {
			continue
		}
		if _, prev := r.Previous(k); !prev {
			continue
		}
		p.Addrs.Clear()
		if p.Link == nil {
			delete(ps.ByKey, k)
		} else {
			drop = append(drop, p.Link)
		}
	}
	return drop
}

// MemberRekeyed carries this node's block of a member over to its new
// key.
func (h rosterHost) MemberRekeyed(m roster.Member) {
	if h.n.chans != nil {
		h.n.chans.CarryBlock(m.PrevKey, m.Key, m.Label())
	}
}

// Applied follows r, which replaced cur, in the rest of the node.
func (h rosterHost) Applied(cur, r *roster.Roster) {
	n := h.n
	if d, ok := n.peers.Discovery().(mdns.Advertiser); ok {
		if err := d.SetRosterVersion(r.Version); err != nil {
			n.log.Warn("mdns: update roster version", "err", err)
		}
	}
	if n.chans != nil {
		if dropped, stale := n.chans.Set().Revalidate(r); len(dropped)+len(stale) > 0 {
			n.log.Warn("channel policies affected by the roster update", "dropped", len(dropped), "stale", len(stale))
		}
	}
	if n.rx != nil {
		n.rx.Sync.ChannelsChanged() // the update may let us read a channel
	}
	var gone []proto.PubKey
	for _, m := range cur.Members {
		if _, ok := r.Member(m.Key); !ok {
			gone = append(gone, m.Key)
			if n.own != nil {
				n.own.Table().Forget(m.Key)
			}
		}
	}
	if n.store != nil {
		n.out.RefuseQueuedFor(gone)
	}
}

// ReloadRosterFile re-reads the --roster file (SIGHUP), or the home's
// roster file when there is none, and applies it if it is a newer valid
// version.
func (n *Node) ReloadRosterFile() error {
	path := n.cfg.RosterFile
	if path == "" {
		path = n.home.RosterPath()
	}
	r, err := readRosterFile(path)
	if err != nil {
		return err
	}
	return n.roster.Reload(r)
}
