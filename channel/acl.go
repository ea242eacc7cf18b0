package channel

import (
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// CanRead reports whether k may read the channel: k must be a member of r
// and either be listed by key among the readers or have a role at least
// that of a role principal among them. Keys that left the roster lose
// access at once, whatever the policy lists.
func (p *Policy) CanRead(r *roster.Roster, k proto.PubKey) bool {
	role, ok := r.Role(k)
	return ok && grants(p.ReadACL, k, role)
}

// CanWrite reports whether k may post to the channel: like [Policy.CanRead]
// with the writers, except that an observer never writes, whatever the
// policy says.
func (p *Policy) CanWrite(r *roster.Roster, k proto.PubKey) bool {
	role, ok := r.Role(k)
	return ok && role.AtLeast(roster.RoleMember) && grants(p.WriteACL, k, role)
}

// Readers returns every member of r who may read the channel, in key
// order: the fan-out list of the channel.
func (p *Policy) Readers(r *roster.Roster) []proto.PubKey {
	var out []proto.PubKey
	for _, m := range r.Members {
		if grants(p.ReadACL, m.Key, m.Role) {
			out = append(out, m.Key)
		}
	}
	return out
}

// Writers returns every member of r who may post to the channel, in key order.
func (p *Policy) Writers(r *roster.Roster) []proto.PubKey {
	var out []proto.PubKey
	for _, m := range r.Members {
		if m.Role.AtLeast(roster.RoleMember) && grants(p.WriteACL, m.Key, m.Role) {
			out = append(out, m.Key)
		}
	}
	return out
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
