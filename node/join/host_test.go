package join

import (
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// fakeHost is a node as the package sees it: a roster, a key, the
// pending list and counters, with no links.
type fakeHost struct {
	t       *testing.T
	key     ed25519.PrivateKey
	roster  atomic.Pointer[roster.Roster]
	pending *peers.Pending
	wg      sync.WaitGroup

	mu       sync.Mutex
	counts   map[Counter]int
	byReason map[string]int
	applied  []*roster.Roster
}

// newFakeHost returns a host for key with roster r, or with a one-node
// org of key's own when r is nil.
func newFakeHost(t *testing.T, key ed25519.PrivateKey, r *roster.Roster) *fakeHost {
	if r == nil {
		var err error
		if r, err = roster.New("org-"+proto.PubKeyOf(key).Fingerprint(), key, ""); err != nil {
			t.Fatal(err)
		}
	}
	h := &fakeHost{t: t, key: key, pending: peers.NewPending(), counts: map[Counter]int{}, byReason: map[string]int{}}
	h.roster.Store(r)
	return h
}

func (h *fakeHost) Roster() *roster.Roster            { return h.roster.Load() }
func (h *fakeHost) Self() proto.PubKey                { return proto.PubKeyOf(h.key) }
func (h *fakeHost) SignRoster(r *roster.Roster) error { return r.Sign(h.key) }
func (h *fakeHost) Advertised() []string              { return []string{"tcp://192.0.2.7:7437"} }
func (h *fakeHost) PeerAddrs() []string               { return []string{"tcp://192.0.2.8:7437", "bad address"} }
func (h *fakeHost) Pending() *peers.Pending           { return h.pending }
func (h *fakeHost) LinkConfig() transport.Config      { return transport.Config{} }

func (h *fakeHost) ApplyRoster(r *roster.Roster) error {
	if err := roster.CheckUpdate(h.Roster(), r); err != nil {
		return err
	}
	h.mu.Lock()
	h.applied = append(h.applied, r)
	h.mu.Unlock()
	h.roster.Store(r)
	return nil
}

func (h *fakeHost) Go(f func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
}

// wait waits for the goroutines the package started, bounded in time.
func (h *fakeHost) wait() {
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.t.Fatal("goroutines still running after 30s")
	}
}

func (h *fakeHost) Count(c Counter) {
	h.mu.Lock()
	h.counts[c]++
	h.mu.Unlock()
}

func (h *fakeHost) CountReason(c ReasonCounter, reason string) {
	h.mu.Lock()
	h.byReason[string(rune('0'+c))+reason]++
	h.mu.Unlock()
}

func (h *fakeHost) count(c Counter) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[c]
}

func (h *fakeHost) reasons(c ReasonCounter, reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byReason[string(rune('0'+c))+reason]
}

// acmeRoster is org acme: admin its admin, and each of members a member.
func acmeRoster(t *testing.T, admin ed25519.PrivateKey, members ...ed25519.PrivateKey) *roster.Roster {
	t.Helper()
	r, err := roster.New("acme", admin, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if len(members) == 0 {
		return r
	}
	next := r.Next()
	for _, m := range members {
		if err := next.Add(roster.Member{Key: proto.PubKeyOf(m), Role: roster.RoleMember}); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.Sign(admin); err != nil {
		t.Fatal(err)
	}
	return next
}

// TestInvitesOverHost drives the invites through their Host alone: an
// admin makes an invite whose token carries its address and the
// members' it knows; the joiner presenting it is added by a roster
// update signed here and applied; the invite is then used, and a second
// use, a wrong secret and an unknown invite are refused, each counted by
// its reason; a node that is not an admin makes none.
func TestInvitesOverHost(t *testing.T) {
	t.Parallel()
	admin, joiner := newKey(t), newKey(t)
	h := newFakeHost(t, admin, acmeRoster(t, admin))
	b := NewInvites(h, Config{Home: t.TempDir()})
	made, err := b.CreateInvite(api.CreateInvite{Role: "member", Name: "dave"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := proto.ParseInviteToken(made.Token)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Org != "acme" || strings.Join(tok.Addrs, ",") != "tcp://192.0.2.7:7437" || strings.Join(tok.Seeds, ",") != "tcp://192.0.2.8:7437" {
		t.Fatalf("token %+v", tok)
	}
	if h.count(InviteCreated) != 1 {
		t.Fatal("invite not counted")
	}
	p := &proto.HandshakePayload{Identity: proto.PubKeyOf(joiner), Invite: tok.Proof(), Name: "ignored", Remote: "192.0.2.9:4000"}
	if err := b.Admit(p); err != nil {
		t.Fatal(err)
	}
	m, ok := h.Roster().Member(proto.PubKeyOf(joiner))
	if !ok || m.Name != "dave" || m.Role != roster.RoleMember || len(h.applied) != 1 {
		t.Fatalf("joiner not added as the invite says: %+v %v", m, ok)
	}
	if err := b.Admit(p); !errors.Is(err, ErrInviteRefused) || h.reasons(InviteRejected, "used") != 1 {
		t.Fatalf("a second use: %v", err)
	}
	bad := *p
	bad.Invite = &proto.InviteProof{ID: tok.ID, Secret: make([]byte, len(tok.Secret))}
	if err := b.Admit(&bad); !errors.Is(err, ErrInviteRefused) || h.reasons(InviteRejected, "bad_secret") != 1 {
		t.Fatalf("a wrong secret: %v", err)
	}
	bad.Invite = &proto.InviteProof{ID: make([]byte, len(tok.ID)), Secret: tok.Secret}
	if err := b.Admit(&bad); !errors.Is(err, ErrInviteRefused) || h.reasons(InviteRejected, "unknown") != 1 {
		t.Fatalf("an unknown invite: %v", err)
	}
	list, err := b.InviteList()
	if err != nil || len(list.Invites) != 1 || list.Invites[0].State != "used" || !list.Invites[0].UsedBy.Equal(proto.PubKeyOf(joiner)) {
		t.Fatalf("list %+v, %v", list, err)
	}
	member := newFakeHost(t, joiner, h.Roster())
	if _, err := NewInvites(member, Config{Home: t.TempDir()}).CreateInvite(api.CreateInvite{Role: "member"}); !errors.Is(err, apierr.ErrForbidden) {
		t.Fatalf("a member made an invite: %v", err)
	}
}

// TestKnocksOverHost drives the responder's side through its Host alone:
// a knock from a non-member is refused and lists it as pending with its
// org and its proof of being fresh; a knock from a member is let through
// (the transport then sends it the roster); a member drops off the list.
func TestKnocksOverHost(t *testing.T) {
	t.Parallel()
	admin, stranger, member := newKey(t), newKey(t), newKey(t)
	h := newFakeHost(t, admin, acmeRoster(t, admin, member))
	k := NewKnocks(h, Config{Home: t.TempDir()})
	fresh, err := roster.New("org-"+proto.PubKeyOf(stranger).Fingerprint(), stranger, "")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := fresh.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := &proto.HandshakePayload{Identity: proto.PubKeyOf(stranger), Org: fresh.Org, Knock: true, Fresh: fb, Name: "laptop", Remote: "192.0.2.3:5000"}
	if err := k.Answer(p); err == nil {
		t.Fatal("a stranger's knock was let through")
	}
	got := k.PendingList().Nodes
	if len(got) != 1 || !got[0].Key.Equal(p.Identity) || got[0].Org != fresh.Org || !got[0].Fresh {
		t.Fatalf("pending %+v", got)
	}
	if err := k.Answer(&proto.HandshakePayload{Identity: proto.PubKeyOf(member), Org: "other", Knock: true}); err != nil {
		t.Fatalf("a member's knock: %v", err)
	}
	if h.count(KnockReceived) != 2 {
		t.Fatalf("knocks counted %d", h.count(KnockReceived))
	}
	next := h.Roster().Next()
	if err := next.Add(roster.Member{Key: p.Identity, Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := next.Sign(admin); err != nil {
		t.Fatal(err)
	}
	if err := h.ApplyRoster(next); err != nil {
		t.Fatal(err)
	}
	if got := k.PendingList().Nodes; len(got) != 0 {
		t.Fatalf("a member still pending: %+v", got)
	}
	st := k.AdoptState()
	if st.Fresh || st.Org != "acme" {
		t.Fatalf("adopt state of an org's admin %+v", st)
	}
}

// TestInvitesAwaitSignatures: under a quorum of 2, an invite's joiner is
// refused for now and the update adding it, signed here, is written to
// the home for the other admin; the invite waits, bound to that joiner,
// and is used once a roster listing the joiner is in force.
func TestInvitesAwaitSignatures(t *testing.T) {
	t.Parallel()
	a1, a2, joiner := newKey(t), newKey(t), newKey(t)
	r, err := roster.New("acme", a1, "a")
	if err != nil {
		t.Fatal(err)
	}
	two := r.Next()
	if err := two.Add(roster.Member{Key: proto.PubKeyOf(a2), Role: roster.RoleAdmin, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := two.SetQuorum(2); err != nil {
		t.Fatal(err)
	}
	if err := two.Sign(a1); err != nil {
		t.Fatal(err)
	}
	h := newFakeHost(t, a1, two)
	home := t.TempDir()
	b := NewInvites(h, Config{Home: home})
	made, err := b.CreateInvite(api.CreateInvite{Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := proto.ParseInviteToken(made.Token)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Quorum != 2 {
		t.Fatalf("token quorum %d", tok.Quorum)
	}
	p := &proto.HandshakePayload{Identity: proto.PubKeyOf(joiner), Invite: tok.Proof()}
	for i := 1; i <= 2; i++ {
		if err := b.Admit(p); !errors.Is(err, ErrInviteRefused) || h.reasons(InviteRejected, "awaiting_signatures") != i {
			t.Fatalf("admission %d under a quorum: %v", i, err)
		}
	}
	if h.count(InviteAwaitingSignatures) != 1 || len(h.applied) != 0 {
		t.Fatalf("update written %d times, applied %d", h.count(InviteAwaitingSignatures), len(h.applied))
	}
	list, err := b.InviteList()
	if err != nil || list.Invites[0].State != "waiting" || !strings.HasPrefix(list.Invites[0].RosterUpdate, home) {
		t.Fatalf("list %+v, %v", list, err)
	}
	if _, err := os.Stat(list.Invites[0].RosterUpdate); err != nil {
		t.Fatal(err)
	}
	next := two.Next()
	if err := next.Add(roster.Member{Key: p.Identity, Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []ed25519.PrivateKey{a1, a2} {
		if err := next.Sign(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ApplyRoster(next); err != nil {
		t.Fatal(err)
	}
	if list, err := b.InviteList(); err != nil || list.Invites[0].State != "used" {
		t.Fatalf("after the update: %+v, %v", list, err)
	}
}
