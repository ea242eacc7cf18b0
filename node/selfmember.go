package node

import (
	"net/http"
	"os"
	"strings"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/roster"
)

// This node's own place in its roster: the name it is listed under, and
// what it does while it is not a member.

// The counters counted in this file.
var (
	cTxRefusedNotMember  = newCounter("tx.refused.not_member", famSendRefused, "not_member")
	cRosterSelfNotMember = newEvent("roster.self_not_member")
)

// memberToSend refuses to send from a node outside its roster, naming
// why, rather than the channel's writers or the role: every member drops
// what it signs.
func (n *Node) memberToSend() error {
	r := n.Roster()
	if _, ok := r.Member(n.id.Pub); ok {
		return nil
	}
	n.metrics.inc(cTxRefusedNotMember)
	if n.peers.RemovedSelf() {
		return refuse(http.StatusForbidden, "meshctl doctor says how to come back",
			"this node was removed from the roster (org %q, roster v%d): every member refuses what it sends", r.Org, r.Version)
	}
	return refuse(http.StatusForbidden, "meshctl doctor says how to be added",
		"this node is not a member of its roster (org %q, roster v%d): every member refuses what it sends", r.Org, r.Version)
}

// warnNotMember says, at start, that this node is not in its own roster:
// it runs, and the admins' nodes it dials list it as pending until one of
// them adds it; the roster update then reaches it on its next link.
func (n *Node) warnNotMember(r *roster.Roster) {
	if _, ok := r.Member(n.id.Pub); ok {
		return
	}
	n.metrics.inc(cRosterSelfNotMember)
	n.log.Warn("this node is not a member of its roster: it links once an admin adds it "+
		"(on an admin's node: meshctl roster pending, then meshctl roster add FINGERPRINT --role member and meshctl roster publish)",
		"fingerprint", n.id.Pub.Fingerprint(), "org", r.Org, "version", r.Version)
}

// defaultName names the node of home hm that has no name yet after its
// host, so that peers, rosters and pending lists show something a person
// recognises.
func defaultName(hm home.Home, id home.Identity) (home.Identity, error) {
	if id.Name != "" {
		return id, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return id, nil
	}
	h, _, _ = strings.Cut(h, ".")
	if h == "" || roster.CheckName(h) != nil {
		return id, nil
	}
	id, _, err = hm.Init(h)
	return id, err
}
