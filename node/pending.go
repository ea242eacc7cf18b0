package node

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters counted in this file.
var (
	cRosterSelfNotMember = newEvent("roster.self_not_member")
)

// Bounds of the pending list: how many refused nodes are remembered, how
// many of them one source (an IPv4 address, an IPv6 /64, or the local
// socket) may hold, how fast one source may add new ones, and when an
// entry no one refreshes is forgotten. Nothing else ever removes a listed
// node: a full list refuses new keys, and refreshing a listed key moves
// no one out. So a flood of fresh keys from one source fills that
// source's share and no more, and a newcomer from anywhere else is still
// listed.
const (
	maxPending       = 256
	maxPendingSource = 8                // entries one source may hold
	pendingSourceNew = time.Minute      // after its first maxPendingSource, one new key per source this often
	pendingExpiry    = 24 * time.Hour   // an entry not seen for this long is forgotten
	pendingSweep     = 10 * time.Minute // how often expired entries are looked for at most
)

// Why [pendingBook.record] left a new key out.
const (
	pendingListed      = ""
	pendingFull        = "full"         // the list holds maxPending entries
	pendingSourceFull  = "source_full"  // the source holds maxPendingSource entries
	pendingRateLimited = "rate_limited" // the source added new keys too fast
)

// pendingBook remembers the nodes this node refused because they are not
// in the roster: what an admin needs to add one (meshctl roster pending,
// then roster add FINGERPRINT). It lives in memory only.
type pendingBook struct {
	mu      sync.Mutex // guards the fields below
	byKey   map[proto.PubKey]*pendingEntry
	sources map[string]*pendingSource // sources holding at least one entry
	swept   time.Time                 // when expired entries were last dropped
}

type pendingEntry struct {
	api.PendingNode
	source string // the source it was listed from, which it counts against
}

// pendingSource is one source's share of the list.
type pendingSource struct {
	entries int
	newKeys *rate.Limiter // new entries from this source
}

func newPendingBook() *pendingBook {
	return &pendingBook{byKey: map[proto.PubKey]*pendingEntry{}, sources: map[string]*pendingSource{}}
}

// pendingSourceOf names the source of a refused dial for the per-source
// share: the IPv4 address, the /64 of an IPv6 address (one host holds a
// whole /64), or "local" for the Unix socket and anything unparsable.
func pendingSourceOf(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "local"
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// record notes a refused non-member. A key already listed is refreshed;
// a new key is listed unless the list or its source's share is full or
// its source adds keys too fast: then record returns why it was left out.
func (b *pendingBook) record(p *proto.HandshakePayload, now time.Time) (refused string) {
	fresh := p.Knock && checkFresh(p) // a signature check: outside the lock
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byKey[p.Identity]
	if e == nil {
		src := pendingSourceOf(p.Remote)
		if refused = b.admitLocked(src, now); refused != pendingListed {
			return refused
		}
		e = &pendingEntry{PendingNode: api.PendingNode{Key: p.Identity, Fingerprint: p.Identity.Fingerprint(), FirstSeen: now}, source: src}
		b.byKey[p.Identity] = e
	}
	e.Name, e.LastSeen = p.Name, now
	e.Org, e.Fresh = "", false
	if p.Knock {
		e.Org, e.Fresh = p.Org, fresh
	}
	if p.Remote != "" && p.Remote != "@" {
		// "@" is an unnamed Unix socket peer: keep the last real address.
		e.Address = p.Remote
	}
	e.Attempts++
	return pendingListed
}

// admitLocked decides whether src may list one more key, and counts it
// against src if so.
func (b *pendingBook) admitLocked(src string, now time.Time) string {
	if len(b.byKey) >= maxPending && now.Sub(b.swept) >= pendingSweep {
		b.sweepLocked(now)
	}
	if len(b.byKey) >= maxPending {
		return pendingFull
	}
	s := b.sources[src]
	if s == nil {
		s = &pendingSource{newKeys: rate.NewLimiter(rate.Every(pendingSourceNew), maxPendingSource)}
		b.sources[src] = s
	}
	if s.entries >= maxPendingSource {
		return pendingSourceFull
	}
	if !s.newKeys.AllowN(now, 1) {
		return pendingRateLimited
	}
	s.entries++
	return pendingListed
}

// sweepLocked forgets the entries no one has refreshed for pendingExpiry.
func (b *pendingBook) sweepLocked(now time.Time) {
	b.swept = now
	for k, e := range b.byKey {
		if now.Sub(e.LastSeen) >= pendingExpiry {
			b.dropLocked(k, e)
		}
	}
}

func (b *pendingBook) dropLocked(k proto.PubKey, e *pendingEntry) {
	delete(b.byKey, k)
	if s := b.sources[e.source]; s != nil {
		if s.entries--; s.entries <= 0 {
			// The source's rate state goes with its last entry: the map
			// holds no more sources than the list holds entries.
			delete(b.sources, e.source)
		}
	}
}

// forget drops k, which has become a member.
func (b *pendingBook) forget(k proto.PubKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.byKey[k]; e != nil {
		b.dropLocked(k, e)
	}
}

// list returns the entries, most recently seen first.
func (b *pendingBook) list() []api.PendingNode {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]api.PendingNode, 0, len(b.byKey))
	for _, e := range b.byKey {
		out = append(out, e.PendingNode)
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
	if why := n.pending.record(p, time.Now()); why != pendingListed {
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
