package node

import (
	"os"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	cRosterSelfNotMember = newEvent("roster.self_not_member")
)

// PendingList returns the nodes this node refused as non-members and
// that have not become members since.
func (n *Node) PendingList() api.Pending {
	r := n.Roster()
	out := api.Pending{Nodes: []api.PendingNode{}}
	for _, e := range n.peers.Pending.List() {
		if _, ok := r.Member(e.Key); ok {
			n.peers.Pending.Forget(e.Key)
			continue
		}
		out.Nodes = append(out.Nodes, e)
	}
	return out
}

// refusedNonMember records p, which admit refuses as not a member, and
// logs it (rate-limited per key).
func (n *Node) refusedNonMember(p *proto.HandshakePayload) {
	fresh := p.Knock && checkFresh(p) // a signature check: outside the book's lock
	if why := n.peers.Pending.Record(p, fresh, time.Now()); why != peers.Listed {
		n.metrics.Inc("pending.refused." + why)
	}
	args := []any{"fingerprint", p.Identity.Fingerprint(), "claimed_name", p.Name, "addr", p.Remote}
	if p.Knock {
		// It knocked from another org (knock.go): say which, and whether
		// it adopts this org once added.
		args = append(args, "from_org", p.Org, "claims_fresh", len(p.Fresh) > 0)
	}
	n.logRL.log(n.log, "refused a node that is not in the roster; an admin can add it with meshctl roster add",
		p.Identity.Fingerprint(), "pending", args...)
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

// defaultName names a node that has no name yet after its host, so that
// peers, rosters and pending lists show something a person recognises.
func (n *Node) defaultName(id home.Identity) (home.Identity, error) {
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
	id, _, err = n.home.Init(h)
	return id, err
}
