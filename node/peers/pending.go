package peers

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
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

// Why [Pending.Record] left a new key out.
const (
	Listed             = ""
	PendingFull        = "full"         // the list holds maxPending entries
	PendingSourceFull  = "source_full"  // the source holds maxPendingSource entries
	PendingRateLimited = "rate_limited" // the source added new keys too fast
)

// Pending remembers the nodes this node refused because they are not
// in the roster: what an admin needs to add one (meshctl roster pending,
// then roster add FINGERPRINT). It lives in memory only.
type Pending struct {
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

// NewPending returns an empty pending list.
func NewPending() *Pending {
	return &Pending{byKey: map[proto.PubKey]*pendingEntry{}, sources: map[string]*pendingSource{}}
}

// sourceOf names the source of a refused dial for the per-source
// share: the IPv4 address, the /64 of an IPv6 address (one host holds a
// whole /64), or "local" for the Unix socket and anything unparsable.
func sourceOf(remote string) string {
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

// Record notes a refused non-member; fresh says its knock carries a
// fresh org it adopts once added (checked by the caller, outside the lock). A key already listed is refreshed;
// a new key is listed unless the list or its source's share is full or
// its source adds keys too fast: then record returns why it was left out.
func (b *Pending) Record(p *proto.HandshakePayload, fresh bool, now time.Time) (refused string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byKey[p.Identity]
	if e == nil {
		src := sourceOf(p.Remote)
		if refused = b.admitLocked(src, now); refused != Listed {
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
	return Listed
}

// admitLocked decides whether src may list one more key, and counts it
// against src if so.
func (b *Pending) admitLocked(src string, now time.Time) string {
	if len(b.byKey) >= maxPending && now.Sub(b.swept) >= pendingSweep {
		b.sweepLocked(now)
	}
	if len(b.byKey) >= maxPending {
		return PendingFull
	}
	s := b.sources[src]
	if s == nil {
		s = &pendingSource{newKeys: rate.NewLimiter(rate.Every(pendingSourceNew), maxPendingSource)}
		b.sources[src] = s
	}
	if s.entries >= maxPendingSource {
		return PendingSourceFull
	}
	if !s.newKeys.AllowN(now, 1) {
		return PendingRateLimited
	}
	s.entries++
	return Listed
}

// sweepLocked forgets the entries no one has refreshed for pendingExpiry.
func (b *Pending) sweepLocked(now time.Time) {
	b.swept = now
	for k, e := range b.byKey {
		if now.Sub(e.LastSeen) >= pendingExpiry {
			b.dropLocked(k, e)
		}
	}
}

func (b *Pending) dropLocked(k proto.PubKey, e *pendingEntry) {
	delete(b.byKey, k)
	if s := b.sources[e.source]; s != nil {
		if s.entries--; s.entries <= 0 {
			// The source's rate state goes with its last entry: the map
			// holds no more sources than the list holds entries.
			delete(b.sources, e.source)
		}
	}
}

// Forget drops k, which has become a member.
func (b *Pending) Forget(k proto.PubKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.byKey[k]; e != nil {
		b.dropLocked(k, e)
	}
}

// List returns the entries, most recently seen first.
func (b *Pending) List() []api.PendingNode {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]api.PendingNode, 0, len(b.byKey))
	for _, e := range b.byKey {
		out = append(out, e.PendingNode)
	}
	slices.SortFunc(out, func(a, b api.PendingNode) int { return b.LastSeen.Compare(a.LastSeen) })
	return out
}
