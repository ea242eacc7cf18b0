package join

import (
	"log/slog"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// PendingList returns the nodes this node refused as non-members and
// that have not become members since.
func (k *Knocks) PendingList() api.Pending {
	r := k.h.Roster()
	pending := k.h.Pending()
	out := api.Pending{Nodes: []api.PendingNode{}}
	for _, e := range pending.List() {
		if _, ok := r.Member(e.Key); ok {
			pending.Forget(e.Key)
			continue
		}
		out.Nodes = append(out.Nodes, e)
	}
	return out
}

// RefusedNonMember records p, which the node's admission refuses as not
// a member, and logs it (rate-limited per key).
func (k *Knocks) RefusedNonMember(p *proto.HandshakePayload) {
	fresh := p.Knock && checkFresh(p) // a signature check: outside the book's lock
	if why := k.h.Pending().Record(p, fresh, time.Now()); why != peers.Listed {
		k.h.CountReason(PendingRefused, why)
	}
	args := []any{"fingerprint", p.Identity.Fingerprint(), "claimed_name", p.Name, "addr", p.Remote}
	if p.Knock {
		// It knocked from another org (knocks.go): say which, and whether
		// it adopts this org once added.
		args = append(args, "from_org", p.Org, "claims_fresh", len(p.Fresh) > 0)
	}
	rateLog(k.rl, k.log, slog.LevelInfo, "refused a node that is not in the roster; an admin can add it with meshctl roster add",
		p.Identity.Fingerprint(), "pending", args...)
}
