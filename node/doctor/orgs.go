package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

func (d *Diagnosis) checkOrgs(r *roster.Roster, self proto.PubKey, now time.Time, add addCheck) {
	d.mu.Lock()
	var orgs []seenOrg
	for o, f := range d.foreignOrgs {
		var keys []proto.PubKey
		for k, at := range f.nodes {
			if now.Sub(at) < ForeignOrgFresh {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			orgs = append(orgs, seenOrg{o, keys})
		}
	}
	d.mu.Unlock()
	if len(orgs) == 0 {
		add("org", "ok", "", "org %q; mDNS saw no node of another org in the last %v", r.Org, ForeignOrgFresh)
		return
	}
	sort.Slice(orgs, func(i, j int) bool {
		if len(orgs[i].nodes) != len(orgs[j].nodes) {
			return len(orgs[i].nodes) > len(orgs[j].nodes)
		}
		return orgs[i].org < orgs[j].org
	})
	var names []string
	for _, o := range orgs {
		names = append(names, fmt.Sprintf("%q (%d nodes)", o.org, len(o.nodes)))
	}
	detail := fmt.Sprintf("this node is in org %q (%d members), but mDNS sees nodes of %s, which it ignores",
		r.Org, len(r.Members), strings.Join(names, ", "))
	us := seenOrg{r.Org, []proto.PubKey{self}}
	switch top := orgs[0]; {
	case us.stray(r) && !top.stray(nil):
		// A first plain meshd next to the real org: join it.
		add("org", "problem", fmt.Sprintf("to join %q, ask one of its admins for a token (meshctl invite --role member) and run meshctl join TOKEN here; "+
			"or, as this node knocked there, have an admin add it (meshctl roster pending, roster add, roster publish on their node) and confirm the org here with meshctl adopt ADMIN_FINGERPRINT", top.org), "%s", detail)
	case r.IsAdmin(self) && !us.stray(r):
		// Never advise an admin of a real org to leave it for a stray
		// node's: bring the stray node in, or ignore it.
		var who []string
		for _, o := range orgs {
			for _, k := range o.nodes {
				who = append(who, k.Fingerprint())
			}
		}
		slices.Sort(who)
		if len(who) > 4 {
			who = append(who[:4], "...")
		}
		add("org", "warn", fmt.Sprintf("to bring such a node (%s) into %q: meshctl invite --role member here, then meshctl join TOKEN on that node; a node of an org of its own that is not meant to join can be left alone",
			strings.Join(who, ", "), r.Org), "%s", detail)
	default:
		add("org", "warn", fmt.Sprintf("if this node belongs in %q, ask one of its admins for a token (meshctl invite --role member) and run meshctl join TOKEN here; if not, nothing to do", top.org), "%s", detail)
	}
}

// seenOrg is an org mDNS reported, with the nodes it reported of it.
type seenOrg struct {
	org   string
	nodes []proto.PubKey
}

// stray reports whether o looks like the one-node org a first plain
// meshd makes: named after its only node, org-<fingerprint> (and, for
// this node's org, r, with no other member).
func (o seenOrg) stray(r *roster.Roster) bool {
	if r != nil && len(r.Members) > 1 {
		return false
	}
	for _, k := range o.nodes {
		if o.org == "org-"+k.Fingerprint() {
			return true
		}
	}
	return false
}

// seedsOtherOrgFix is the fix for seeds that answer as another org. A
// fresh node knocked there (node/join) and adopts that org once one of its
// admins adds it; a node of an org with members never does.
func seedsOtherOrgFix(r *roster.Roster, self proto.PubKey) string {
	if join.FreshRoster(r, self) != nil {
		return fmt.Sprintf("this node, a one-node org of its own, knocked at the seed and is listed there as pending: "+
			"on an admin's node of the seed's org, meshctl roster add %s --role member then meshctl roster publish, and this node adopts that org by itself; "+
			"or ask one of its admins for an invite (meshctl invite --role member) and run meshctl join TOKEN here", self.Fingerprint())
	}
	return fmt.Sprintf("this node is in org %q (%d members), and stays in it even if the seed's org adds it; to join the seed's org, ask one of its admins for an invite (meshctl invite --role member on their node) and run meshctl join --force TOKEN here; or, if the seed should be in %q, have it join this org",
		r.Org, len(r.Members), r.Org)
}
