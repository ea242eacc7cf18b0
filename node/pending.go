package node

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Bounds of the pending list: how many refused nodes are remembered, and
// how often a new one may be added. A flood of fresh keys (each costing
// the attacker a handshake) replaces old entries at most this fast, so
// a node that knocks now and then stays listed.
const (
	maxPending    = 256
	pendingPerMin = 60 // new entries a minute, in a bucket of that size
)

// pendingBook remembers the nodes this node refused because they are not
// in the roster: what an admin needs to add one (meshctl roster pending,
// then roster add FINGERPRINT). It lives in memory only.
type pendingBook struct {
	mu      sync.Mutex // guards the fields below
	byKey   map[proto.PubKey]*api.PendingNode
	tokens  float64   // the rate limit's bucket of new entries
	refill  time.Time // when tokens was last refilled
	dropped uint64    // new entries left out by the rate limit
}

func newPendingBook() *pendingBook {
	return &pendingBook{byKey: map[proto.PubKey]*api.PendingNode{}, tokens: pendingPerMin}
}

// record notes a refused non-member. It reports whether a new key was
// left out by the rate limit.
func (b *pendingBook) record(p *proto.HandshakePayload, now time.Time) (limited bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byKey[p.Identity]
	if e == nil {
		b.tokens = min(pendingPerMin, b.tokens+now.Sub(b.refill).Minutes()*pendingPerMin)
		b.refill = now
		if b.tokens < 1 {
			b.dropped++
			return true
		}
		b.tokens--
		if len(b.byKey) >= maxPending {
			b.evictLocked()
		}
		e = &api.PendingNode{Key: p.Identity, Fingerprint: p.Identity.Fingerprint(), FirstSeen: now}
		b.byKey[p.Identity] = e
	}
	e.Name, e.LastSeen = p.Name, now
	if p.Remote != "" && p.Remote != "@" {
		// "@" is an unnamed Unix socket peer: keep the last real address.
		e.Address = p.Remote
	}
	e.Attempts++
	return false
}

// evictLocked drops the entry seen least recently.
func (b *pendingBook) evictLocked() {
	var old *api.PendingNode
	for _, e := range b.byKey {
		if old == nil || e.LastSeen.Before(old.LastSeen) {
			old = e
		}
	}
	if old != nil {
		delete(b.byKey, old.Key)
	}
}

// forget drops k, which has become a member.
func (b *pendingBook) forget(k proto.PubKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byKey, k)
}

// list returns the entries, most recently seen first.
func (b *pendingBook) list() []api.PendingNode {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]api.PendingNode, 0, len(b.byKey))
	for _, e := range b.byKey {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b api.PendingNode) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}

// PendingList returns the nodes this node refused as non-members and
// that have not become members since.
func (n *Node) PendingList() api.Pending {
	r := n.Roster()
	out := api.Pending{Nodes: []api.PendingNode{}}
	for _, e := range n.pending.list() {
		if _, ok := r.Member(e.Key); ok {
			n.pending.forget(e.Key)
			continue
		}
		out.Nodes = append(out.Nodes, e)
	}
	return out
}

// refusedNonMember records p, which admit refuses as not a member, and
// logs it (rate-limited per key).
func (n *Node) refusedNonMember(p *proto.HandshakePayload) {
	if n.pending.record(p, time.Now()) {
		n.metrics.Inc("pending.rate_limited")
	}
	n.logRL.log(n.log, "refused a node that is not in the roster; an admin can add it with meshctl roster add",
		p.Identity.Fingerprint(), "pending",
		"fingerprint", p.Identity.Fingerprint(), "claimed_name", p.Name, "addr", p.Remote)
}

// warnNotMember says, at start, that this node is not in its own roster:
// it runs, and the admins' nodes it dials list it as pending until one of
// them adds it; the roster update then reaches it on its next link.
func (n *Node) warnNotMember(r *roster.Roster) {
	if _, ok := r.Member(n.id.Pub); ok {
		return
	}
	n.metrics.Inc("roster.self_not_member")
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
