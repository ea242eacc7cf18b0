package node

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	cInviteClaimedNameRefused = newEvent("invite.claimed_name_refused")
)

// nameIndexCache holds the name index of the current roster, rebuilt
// when the roster changes, so displays can tell a unique name from one
// another member's resembles without comparing every pair each time.
type nameIndexCache struct {
	mu sync.Mutex // guards the fields below
	r  *roster.Roster
	ix roster.NameIndex
}

// of returns the name index of r.
func (c *nameIndexCache) of(r *roster.Roster) roster.NameIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r != r {
		c.r, c.ix = r, r.Names()
	}
	return c.ix
}

// checkInviteName checks the name an invite is to give: valid, and unlike
// every member's name.
func checkInviteName(r *roster.Roster, name string) error {
	if name == "" {
		return nil
	}
	if err := roster.CheckName(name); err != nil {
		return badRequest("name: %w", err)
	}
	if o, taken := r.NameTaken(name, proto.PubKey{}); taken {
		return refuse(http.StatusConflict, hintMembers, "the roster already has a member named %+q (%s), which %+q looks like",
			o.Name, o.Key.Fingerprint(), name)
	}
	return nil
}

// inviteeName is the name a joiner gets: the invite's, or else the name
// the joiner claims when it is valid and unlike every member's. A refused
// claim is counted and logged, and the joiner joins unnamed.
func (n *Node) inviteeName(cur *roster.Roster, s *storedInvite, p *proto.HandshakePayload) string {
	if s.Name != "" || p.Name == "" {
		return s.Name
	}
	err := roster.CheckName(p.Name)
	if o, taken := cur.NameTaken(p.Name, p.Identity); err == nil && taken {
		err = fmt.Errorf("it looks like %+q, the name of %s", o.Name, o.Key.Fingerprint())
	}
	if err == nil {
		return p.Name
	}
	n.metrics.inc(cInviteClaimedNameRefused)
	n.logRL.log(n.log, "invite: the joiner's claimed name is refused; it joins unnamed",
		p.Identity.Fingerprint(), "claimed_name", "peer", p.Identity.Fingerprint(), "claimed_name", fmt.Sprintf("%+q", p.Name), "err", err)
	return ""
}
