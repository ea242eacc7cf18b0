package peers

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

func testKey(t *testing.T) proto.PubKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return proto.PubKey(pub)
}

// TestDueLocked: due members are dialled at most MaxDials at a time, a
// member's first dial is put off once, a member in backoff is not
// dialled and sets the next wake-up, and a seed whose member is being
// dialled waits.
func TestDueLocked(t *testing.T) {
	tbl := NewTable()
	now := time.Unix(1_800_000_000, 0)
	h := &recordDials{}
	var members []*Peer
	for i := range MaxDials + 2 {
		p := tbl.MemberLocked(testKey(t))
		p.Addrs.Merge([]string{tcpAddr(i)}, Self, now)
		members = append(members, p)
	}
	// First round: every first dial is put off.
	next := tbl.DueLocked(now, proto.NodeID{}, 10, h)
	if len(h.started) != 0 {
		t.Fatalf("first dials not spread: %d started", len(h.started))
	}
	for _, p := range members {
		if !p.Spread || p.Next.Before(now) || next.After(p.Next) {
			t.Fatalf("spread: %v next %v, wake-up %v", p.Spread, p.Next, next)
		}
	}
	// Once due: MaxDials of them start.
	later := now.Add(time.Hour)
	tbl.DueLocked(later, proto.NodeID{}, 10, h)
	if len(h.started) != MaxDials || tbl.DialsLocked() != MaxDials {
		t.Fatalf("%d started, %d in flight, want %d", len(h.started), tbl.DialsLocked(), MaxDials)
	}
	// A seed whose member is being dialled is not dialled too.
	a, err := transport.ParseAddr(tcpAddr(99))
	if err != nil {
		t.Fatal(err)
	}
	seed := &Peer{Seed: true, Key: h.started[0].Key, Addrs: SeedBook(a)}
	tbl.Seeds = append(tbl.Seeds, seed)
	// A member in backoff sets the wake-up.
	for _, p := range members {
		if !p.Dialing {
			p.Next = later.Add(time.Second)
		}
	}
	if next := tbl.DueLocked(later, proto.NodeID{}, 10, h); !next.Equal(later.Add(time.Second)) {
		t.Fatalf("wake-up %v, want %v", next, later.Add(time.Second))
	}
	if seed.Dialing || len(h.started) != MaxDials {
		t.Fatalf("seed dialled beside its member, or a member in backoff dialled: %d started", len(h.started))
	}
}

// TestLinkDownLocked: a refused link backs off on RefusedBackoff (or the
// removed node's delay) and holds its seed back as long; a plain drop
// redials after Redial and clears the refusals; a non-member's entry is
// dropped; a link that is no longer the member's changes nothing.
func TestLinkDownLocked(t *testing.T) {
	tbl := NewTable()
	now := time.Unix(1_800_000_000, 0)
	k := testKey(t)
	p := tbl.MemberLocked(k)
	pl := &Link{Key: k}
	seed := &Peer{Seed: true, Key: k}
	tbl.Seeds = append(tbl.Seeds, seed)

	p.Link = pl
	if !tbl.LinkDownLocked(pl, LinkDown{Refused: true, Member: true}, now) {
		t.Fatal("a refused link not reported")
	}
	if p.Link != nil || p.Refusals != 1 || p.Next.Before(now.Add(time.Second)) || !seed.Next.Equal(p.Next) {
		t.Fatalf("after a refusal: link %v, refusals %d, next %v, seed next %v", p.Link, p.Refusals, p.Next.Sub(now), seed.Next.Sub(now))
	}
	if tbl.LinkDownLocked(pl, LinkDown{Refused: true, Member: true}, now) || p.Refusals != 1 {
		t.Fatal("a link no longer the member's changed its entry")
	}
	p.Link = pl
	tbl.LinkDownLocked(pl, LinkDown{Refused: true, Removed: true, Member: true}, now)
	if p.Next.Before(now.Add(RemovedRetry)) {
		t.Fatalf("a removed node redials after %v", p.Next.Sub(now))
	}
	p.Link = pl
	if tbl.LinkDownLocked(pl, LinkDown{Member: true, Redial: time.Second}, now) || p.Refusals != 0 || !p.Next.Equal(now.Add(time.Second)) {
		t.Fatalf("after a drop: refusals %d, next %v", p.Refusals, p.Next.Sub(now))
	}
	p.Link = pl
	tbl.LinkDownLocked(pl, LinkDown{}, now)
	if tbl.ByKey[k] != nil {
		t.Fatal("a non-member's entry kept")
	}
}

// TestDialDoneLocked: failed dials count up, back off, keep why for
// doctor and evict a gossiped address after MaxGossipFails; a seed's
// address is never evicted.
func TestDialDoneLocked(t *testing.T) {
	tbl := NewTable()
	now := time.Unix(1_800_000_000, 0)
	p := tbl.MemberLocked(testKey(t))
	p.Addrs.Merge([]string{tcpAddr(1)}, Gossip, now)
	a := p.Addrs.List()[0]
	back := func(fails int) time.Duration { return time.Duration(fails) * time.Second }
	evicted := 0
	for i := range MaxGossipFails {
		p.Dialing = true
		evicted += tbl.DialDoneLocked(p, DialDone{Failed: []DialFailure{{Addr: a}}, Backoff: back}, now)
		if p.Dialing || p.Fails != i+1 || !p.Next.Equal(now.Add(time.Duration(i+1)*time.Second)) || len(p.LastDial) != 1 {
			t.Fatalf("failure %d: dialing %v fails %d next %v why %v", i+1, p.Dialing, p.Fails, p.Next.Sub(now), p.LastDial)
		}
	}
	if evicted != 1 || p.Addrs.Len() != 0 {
		t.Fatalf("evicted %d, left %v", evicted, p.Addrs.List())
	}
	seed := &Peer{Seed: true, Addrs: SeedBook(a)}
	for range MaxSelfFails + 1 {
		if ev := tbl.DialDoneLocked(seed, DialDone{Failed: []DialFailure{{Addr: a}}, Backoff: back}, now); ev != 0 {
			t.Fatalf("a seed's address evicted")
		}
	}
	if seed.Addrs.Len() != 1 {
		t.Fatal("a seed lost its address")
	}
}

// recordDials is a Dialer that records the dials started.
type recordDials struct{ started []*Peer }

func (*recordDials) AskMoveLocked(*Peer, time.Time) time.Time { return time.Time{} }

func (r *recordDials) StartDialLocked(p *Peer, _ []transport.Addr) {
	p.Dialing = true
	r.started = append(r.started, p)
}
