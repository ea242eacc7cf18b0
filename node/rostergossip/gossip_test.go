package rostergossip

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost is a node with two links to member b, recording what the
// keeper sends, counts, refuses and closes.
type fakeHost struct {
	self     proto.PubKey
	links    []*peers.Link
	mu       sync.Mutex
	sent     map[*peers.Link][]proto.FrameType
	counts   [NumCounters]int
	rejected []string
	refused  []string
	applied  int
	rekeyed  []roster.Member
	closed   chan string
	retire   []*peers.Link
}

func (h *fakeHost) Self() proto.PubKey { return h.self }
func (h *fakeHost) SendFrame(pl *peers.Link, t proto.FrameType, _ []byte) {
	h.mu.Lock()
	h.sent[pl] = append(h.sent[pl], t)
	h.mu.Unlock()
}
func (h *fakeHost) Swap(_, _ *roster.Roster, store func(), from *peers.Link) (push, drop []*peers.Link) {
	store()
	for _, pl := range h.links {
		if pl != from {
			push = append(push, pl)
		}
	}
	return push, nil
}
func (h *fakeHost) Retire(*roster.Roster) []*peers.Link {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.retire
	h.retire = nil
	return out
}
func (h *fakeHost) CloseLink(_ *peers.Link, why string) { h.closed <- why }
func (h *fakeHost) Applied(_, _ *roster.Roster)         { h.mu.Lock(); h.applied++; h.mu.Unlock() }
func (h *fakeHost) MemberRekeyed(m roster.Member) {
	h.mu.Lock()
	h.rekeyed = append(h.rekeyed, m)
	h.mu.Unlock()
}
func (h *fakeHost) KeySwitched(proto.PubKey) {}
func (h *fakeHost) Count(c Counter)          { h.mu.Lock(); h.counts[c]++; h.mu.Unlock() }
func (h *fakeHost) Rejected(reason string) {
	h.mu.Lock()
	h.rejected = append(h.rejected, reason)
	h.mu.Unlock()
}
func (h *fakeHost) Refused(_ *peers.Link, reason string, _ error, _ ...any) {
	h.mu.Lock()
	h.refused = append(h.refused, reason)
	h.mu.Unlock()
}

// rig is a keeper of a two-member roster (admin a is this node) over a
// fakeHost, its home in a temporary folder.
type rig struct {
	h     *fakeHost
	k     *Keeper
	home  home.Home
	admin ed25519.PrivateKey
	b     proto.PubKey
	v1    *roster.Roster
}

func newRig(t *testing.T) *rig {
	t.Helper()
	_, admin, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	v1, err := roster.New("acme", admin, "a")
	if err != nil {
		t.Fatal(err)
	}
	b := proto.PubKeyOf(other)
	if err := v1.Add(roster.Member{Key: b, Name: "b", Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := v1.Sign(admin); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{self: proto.PubKeyOf(admin), sent: map[*peers.Link][]proto.FrameType{}, closed: make(chan string, 4)}
	h.links = []*peers.Link{{Key: b}, {Key: b}}
	hm := home.Home{Dir: t.TempDir()}
	k := New(h, hm, slog.New(slog.NewTextHandler(io.Discard, nil)))
	k.Init(v1)
	return &rig{h: h, k: k, home: hm, admin: admin, b: b, v1: v1}
}

// next returns the next version of r, changed by edit and signed by the
// admin.
func (g *rig) next(t *testing.T, r *roster.Roster, edit func(*roster.Roster) error) *roster.Roster {
	t.Helper()
	n := r.Next()
	if edit != nil {
		if err := edit(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Sign(g.admin); err != nil {
		t.Fatal(err)
	}
	return n
}

func encode(t *testing.T, r *roster.Roster) []byte {
	t.Helper()
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeeperOverHost drives the keeper through its Host alone: a newer
// roster from a peer is applied, persisted and pushed on to every other
// link; an older one is answered with ours; a malformed one and a local
// rollback are refused and counted, the rollback as a 409 with its hint.
func TestKeeperOverHost(t *testing.T) {
	g := newRig(t)
	h := g.h
	v2 := g.next(t, g.v1, func(r *roster.Roster) error { return r.SetRole(g.b, roster.RoleOperator) })
	g.k.HandleFrame(h.links[0], encode(t, v2))
	if g.k.Current().Version != v2.Version {
		t.Fatalf("current v%d, want v%d", g.k.Current().Version, v2.Version)
	}
	if onDisk, err := g.home.LoadRoster(); err != nil || onDisk.Version != v2.Version {
		t.Fatalf("persisted: %v %v", onDisk, err)
	}
	if len(h.sent[h.links[0]]) != 0 || len(h.sent[h.links[1]]) != 1 || h.counts[Pushed] != 1 {
		t.Fatalf("pushed %v, want only on the other link", h.sent)
	}
	if h.counts[Accepted] != 1 || h.applied != 1 {
		t.Fatalf("accepted %d, applied %d", h.counts[Accepted], h.applied)
	}

	// A peer behind is brought up to date on its link.
	g.k.HandleFrame(h.links[0], encode(t, g.v1))
	if h.counts[Rollback] != 1 || len(h.sent[h.links[0]]) != 1 || h.sent[h.links[0]][0] != proto.FrameRoster {
		t.Fatalf("older roster: rollback %d, sent %v", h.counts[Rollback], h.sent[h.links[0]])
	}
	g.k.HandleFrame(h.links[0], []byte{0xff})
	if h.counts[Malformed] != 1 || len(h.refused) != 1 || h.refused[0] != "roster.malformed" {
		t.Fatalf("malformed: counted %d, refused %v", h.counts[Malformed], h.refused)
	}

	_, err := g.k.PublishRoster(encode(t, g.v1))
	var ae *apierr.Error
	if !errors.Is(err, ErrRefused) || !errors.Is(err, roster.ErrRollback) || !errors.As(err, &ae) ||
		ae.Status != http.StatusConflict || ae.Hint == "" {
		t.Fatalf("publish of v1 over v2: %v", err)
	}
	if len(h.rejected) != 1 || h.rejected[0] != "rollback" {
		t.Fatalf("rejected %v", h.rejected)
	}
}

// TestConcurrentAppliesPersistNewest applies pairs of increasing roster
// versions at once, as two links gossiping v3 and v4 do. Whatever the
// interleaving, the roster file must end as the newest version applied.
func TestConcurrentAppliesPersistNewest(t *testing.T) {
	g := newRig(t)
	cur := g.v1
	for round := range 100 {
		var docs [][]byte
		for k := range 2 {
			next := g.next(t, cur, func(r *roster.Roster) error { r.Version += uint64(k); return nil })
			docs = append(docs, encode(t, next))
			if k == 1 {
				cur = next
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, b := range docs {
			wg.Go(func() {
				<-start
				_, _ = g.k.PublishRoster(b) // the older one may be refused as a rollback
			})
		}
		close(start)
		wg.Wait()
		if got := g.k.Current().Version; got != cur.Version {
			t.Fatalf("round %d: in memory v%d, want v%d", round, got, cur.Version)
		}
		onDisk, err := g.home.LoadRoster()
		if err != nil {
			t.Fatal(err)
		}
		if onDisk.Version != cur.Version {
			t.Fatalf("round %d: roster file holds v%d after v%d was applied", round, onDisk.Version, cur.Version)
		}
	}
}

// TestRotationRetiresPreviousKey: an update that moves member b to a new
// key is reported once, and the loop closes the links of b's previous key
// when its window ends.
func TestRotationRetiresPreviousKey(t *testing.T) {
	g := newRig(t)
	h := g.h
	_, nk, _ := ed25519.GenerateKey(nil)
	// The window ends a second from now, its skew allowance included.
	until := time.Now().Add(time.Second - roster.PrevKeySkew).UnixMilli()
	v2 := g.next(t, g.v1, func(r *roster.Roster) error { return r.Rekey(g.b, proto.PubKeyOf(nk), until) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.k.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	h.mu.Lock()
	h.retire = []*peers.Link{h.links[0]}
	h.mu.Unlock()
	if _, err := g.k.PublishRoster(encode(t, v2)); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if len(h.rekeyed) != 1 || h.rekeyed[0].PrevKey != g.b || h.counts[MemberRekeyed] != 1 {
		t.Fatalf("rekeyed %+v", h.rekeyed)
	}
	h.mu.Unlock()
	select {
	case why := <-h.closed:
		if why != "previous key retired" {
			t.Fatalf("closed: %q", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the previous key's link was not closed when its window ended")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[LinkRetiredKey] != 1 {
		t.Fatalf("retired %d", h.counts[LinkRetiredKey])
	}
}
