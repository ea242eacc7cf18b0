// Package claims lets several workers behind one node (a pool of agents
// sharing its identity) share its inbox (docs/AGENTS.md): a worker claims
// an unread item for a lease ([Leases.ClaimItem], [Leases.ClaimNext]),
// and no other worker can claim it until the lease ends or the item is
// read (meshctl read, or meshctl respond for a request). Every claim is
// taken under one lock, which also covers the read-state check, so two
// workers never hold one item. Claims live in memory only: a restart of
// meshd returns every claimed item to the pool, which is what an expired
// lease does too.
//
// [Leases] reads the inbox from the history store, and sees the rest of
// the node through [Host]: finding an item by id, reading an inbox
// filter, rendering an item, the inbox's wake-ups, the read hook and the
// counters. It imports history, proto, node/api and node/apierr, never
// node.
package claims
