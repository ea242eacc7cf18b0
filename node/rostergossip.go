package node

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport/mdns"
)

// The counters counted in this file.
var (
	famRosterPushed   = newFamily("meshd_roster_pushes_total", "Roster pushes to peers with an older roster.")
	famRosterRejected = newFamily("meshd_roster_updates_rejected_total", "Roster updates rejected, by reason.", "reason")
	famPersistFailed  = newFamily("meshd_persist_failures_total", "Accepted updates that could not be written to the home, by what.", "what")
	famRosterAccepted = newFamily("meshd_roster_updates_accepted_total", "Roster updates accepted from peers.")

	cRosterPushed            = newCounter("roster.pushed", famRosterPushed)
	cRosterRejectedMalformed = newCounter("roster.rejected.malformed", famRosterRejected, "malformed")
	cRosterRejectedRollback  = newCounter("roster.rejected.rollback", famRosterRejected, "rollback")
	cRosterPersistFailed     = newCounter("roster.persist_failed", famPersistFailed, "roster")
	cRosterAccepted          = newCounter("roster.accepted", famRosterAccepted)
	cLinkRemovedMember       = newCounter("link.removed_member", famLinkEvents, "removed_member")
)

func (n *Node) pushRoster(pl *peers.Link, r *roster.Roster) {
	b, err := r.Encode()
	if err != nil {
		n.log.Error("encode roster", "err", err)
		return
	}
	n.metrics.inc(cRosterPushed)
	n.sendFrame(pl, proto.FrameRoster, b)
}

// handleRoster takes a roster a peer pushed: a newer valid version is
// applied and gossiped on; an older one is answered with ours.
func (n *Node) handleRoster(pl *peers.Link, payload []byte) {
	r, err := roster.Parse(payload)
	if err != nil {
		n.metrics.inc(cRosterRejectedMalformed)
		n.logRL.warn(n.log, "roster from peer rejected", pl.Key.Fingerprint(), "roster.malformed", "peer", pl.Key.Fingerprint(), "err", err)
		return
	}
	cur := n.Roster()
	if r.Org == cur.Org && r.Version == cur.Version {
		return // already have it
	}
	if r.Org == cur.Org && r.Version < cur.Version {
		// The peer is behind: bring it up to date.
		n.metrics.inc(cRosterRejectedRollback)
		n.pushRoster(pl, cur)
		return
	}
	if _, err := n.applyRoster(r, pl); err != nil {
		n.logRL.warn(n.log, "roster from peer rejected", pl.Key.Fingerprint(), "roster.rejected", "peer", pl.Key.Fingerprint(), "version", r.Version, "err", err)
	}
}

// ErrRosterRefused wraps every reason a roster update is not applied.
var ErrRosterRefused = errors.New("roster update refused")

// PublishRoster applies a roster handed in by the local operator (meshctl
// roster publish): it must be a valid update of the current roster. On
// success it is persisted and pushed to every linked peer at once. A
// refusal is an [*Error] with status 409 that wraps [ErrRosterRefused].
func (n *Node) PublishRoster(b []byte) (*roster.Roster, error) {
	r, err := roster.Parse(b)
	if err != nil {
		n.metrics.inc(cRosterRejectedMalformed)
		return nil, rosterRefusal(fmt.Errorf("%w: %w", ErrRosterRefused, err))
	}
	if r, err = n.applyRoster(r, nil); err != nil {
		return nil, rosterRefusal(err)
	}
	return r, nil
}

// rosterRefusal gives a refused roster update its status and hint.
func rosterRefusal(err error) error {
	hint := ""
	switch {
	case errors.Is(err, roster.ErrRollback):
		hint = "bump the version: edit the current roster with meshctl roster add/remove/role"
	case errors.Is(err, roster.ErrTooFewSignatures):
		hint = "collect more admin signatures with meshctl roster sign FILE"
	}
	return &Error{Status: http.StatusConflict, Err: err, Hint: hint}
}

// applyRoster checks r against the current roster under the acceptance
// rules, then persists it, pushes it to every link but from, and
// disconnects members it removed. Updates are applied one at a time
// (rosterMu), so two links delivering v3 and v4 at once cannot leave v3
// in the roster file after v4 was applied.
func (n *Node) applyRoster(r *roster.Roster, from *peers.Link) (*roster.Roster, error) {
	n.rosterMu.Lock()
	defer n.rosterMu.Unlock()
	cur := n.Roster()
	if err := roster.CheckUpdate(cur, r); err != nil {
		n.metrics.Inc("roster.rejected." + rosterReason(err))
		return nil, fmt.Errorf("%w: %w", ErrRosterRefused, err)
	}
	n.peers.NoteRemoved(cur, r)
	if _, ok := r.Member(n.id.Pub); !ok {
		// We were removed. Accept the truth, keep no links; the operator
		// learns it from the log and the status.
		n.log.Warn("this node was removed from the roster", "org", r.Org, "version", r.Version)
	}
	// The swap and the link list are taken under the peers mutex, so
	// that peers.Service.AddLink (which checks membership under it)
	// either sees r or has its link in the list dropped below.
	n.peers.Lock()
	n.roster.Store(r)
	var push, drop []*peers.Link
	for k, p := range n.peers.ByKey {
		if _, ok := r.Member(k); !ok {
			// Not dialled again; the entry goes once its link is down.
			p.Addrs.Clear()
			if p.Link == nil {
				delete(n.peers.ByKey, k)
			} else {
				drop = append(drop, p.Link)
			}
			continue
		}
		if p.Link != nil && p.Link != from {
			push = append(push, p.Link)
		}
	}
	goneSeeds := n.peers.DropRemovedSeedsLocked(func(k proto.PubKey) bool { _, ok := r.Member(k); return ok })
	n.peers.Unlock()
	n.peers.SeedsGone(goneSeeds)

	if err := n.home.SaveRoster(r); err != nil {
		n.metrics.inc(cRosterPersistFailed)
		n.log.Error("persist roster", "err", err)
	}
	n.rosterRekeyed(cur, r)
	n.metrics.inc(cRosterAccepted)
	src := "local"
	if from != nil {
		src = from.Key.Fingerprint()
	}
	n.log.Info("roster updated", "org", r.Org, "from_version", cur.Version, "version", r.Version,
		"members", len(r.Members), "source", src)
	if d, ok := n.disc.(mdns.Advertiser); ok {
		if err := d.SetRosterVersion(r.Version); err != nil {
			n.log.Warn("mdns: update roster version", "err", err)
		}
	}
	if n.channels != nil {
		if dropped, stale := n.channels.Revalidate(r); len(dropped)+len(stale) > 0 {
			n.log.Warn("channel policies affected by the roster update", "dropped", len(dropped), "stale", len(stale))
		}
	}
	if n.syncer != nil {
		n.syncer.ChannelsChanged() // the update may let us read a channel
	}
	var gone []proto.PubKey
	for _, m := range cur.Members {
		if _, ok := r.Member(m.Key); !ok {
			gone = append(gone, m.Key)
			if n.presence != nil {
				n.presence.Forget(m.Key)
			}
		}
	}
	if n.store != nil {
		n.out.RefuseQueuedFor(gone)
	}
	for _, pl := range push {
		n.pushRoster(pl, r)
	}
	for _, pl := range drop {
		n.metrics.inc(cLinkRemovedMember)
		n.log.Info("disconnecting member removed from roster", "peer", pl.Key.Fingerprint())
		n.peers.CloseAsync(pl, "removed from roster")
	}
	return r, nil
}

// rosterReason names a refusal for metrics.
func rosterReason(err error) string {
	switch {
	case errors.Is(err, roster.ErrWrongOrg):
		return "wrong_org"
	case errors.Is(err, roster.ErrRollback):
		return "rollback"
	case errors.Is(err, roster.ErrUnknownSigner):
		return "unknown_signer"
	case errors.Is(err, roster.ErrTooFewSignatures):
		return "too_few_signatures"
	case errors.Is(err, proto.ErrBadSignature):
		return "bad_signature"
	}
	return "invalid"
}

// ReloadRosterFile re-reads the --roster file (SIGHUP) and applies it if
// it is a newer valid version.
func (n *Node) ReloadRosterFile() error {
	path := n.cfg.RosterFile
	if path == "" {
		path = n.home.RosterPath()
	}
	r, err := readRosterFile(path)
	if err != nil {
		return err
	}
	if cur := n.Roster(); r.Org == cur.Org && r.Version == cur.Version {
		n.log.Info("roster reload: unchanged", "version", r.Version)
		return nil
	}
	_, err = n.applyRoster(r, nil)
	return err
}
