package channel

import (
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// CanRead reports whether k may read the channel: k must be a member of r
// and either be listed by key among the readers or have a role at least
// that of a role principal among them. Keys that left the roster lose
// access at once, whatever the policy lists. A member that rotated its
// key (roster prev_key) is listed by either key while r carries both.
func (p *Policy) CanRead(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(k)
	return ok && grantsMember(p.ReadACL, m)
}

// CanWrite reports whether k may post to the channel: like [Policy.CanRead]
// with the writers, except that an observer never writes, whatever the
// policy says.
func (p *Policy) CanWrite(r *roster.Roster, k proto.PubKey) bool {
	m, ok := r.Member(k)
	return ok && m.Role.AtLeast(roster.RoleMember) && grantsMember(p.WriteACL, m)
}

// Readers returns every member of r who may read the channel, in key
// order: the fan-out list of the channel.
func (p *Policy) Readers(r *roster.Roster) []proto.PubKey {
	var out []proto.PubKey
	for _, m := range r.Members {
		if grantsMember(p.ReadACL, m) {
			out = append(out, m.Key)
		}
	}
	return out
}

// Writers returns every member of r who may post to the channel, in key order.
func (p *Policy) Writers(r *roster.Roster) []proto.PubKey {
	var out []proto.PubKey
	for _, m := range r.Members {
		if m.Role.AtLeast(roster.RoleMember) && grantsMember(p.WriteACL, m) {
			out = append(out, m.Key)
		}
	}
	return out
}

// grantsMember reports whether ps admits m by its key, its previous key
// or its role.
func grantsMember(ps []Principal, m roster.Member) bool {
	return grants(ps, m.Key, m.Role) || (!m.PrevKey.IsZero() && grants(ps, m.PrevKey, m.Role))
}

// grants reports whether ps admits a member with key k and role role.
func grants(ps []Principal, k proto.PubKey, role roster.Role) bool {
	for _, pr := range ps {
		if pr.Key.IsZero() {
			if pr.MinRole.Valid() && role.AtLeast(pr.MinRole) {
				return true
			}
		} else if pr.Key.Equal(k) {
			return true
		}
	}
	return false
}
