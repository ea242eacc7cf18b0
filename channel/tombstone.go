package channel

// Deleted reports whether p is a tombstone: a version whose readers and
// writers are both empty. Nobody may read or write such a channel (an
// empty list grants nobody, PROTOCOL.md §11.4), so a node that does not
// know tombstones already stops delivering it; meshd also hides it from
// sends and subscriptions, and drops its subscription.
func (p *Policy) Deleted() bool { return len(p.ReadACL) == 0 && len(p.WriteACL) == 0 }

// Tombstone returns the unsigned version after p that deletes the channel:
// no readers, no writers, history fetch off. The name, the channel admins
// and the retention are kept, so the channel's stored history is pruned by
// the same rules as before. Sign it with [Policy.Sign].
func (p *Policy) Tombstone() *Policy {
	q := p.Next()
	q.ReadACL, q.WriteACL = []Principal{}, []Principal{}
	q.AllowHistory = false
	return q
}
