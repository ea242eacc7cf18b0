package chanadmin

import (
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost is a node of a two-member roster with two links, recording
// what the admin sends, counts, refuses and logs.
type fakeHost struct {
	key      ed25519.PrivateKey
	r        *roster.Roster
	links    []*peers.Link
	mu       sync.Mutex
	sent     map[*peers.Link][]proto.FrameType
	counts   [NumCounters]int
	rejected []string
	refused  int
	changed  int
}

func newFakeHost(t *testing.T, admin bool) (*fakeHost, ed25519.PrivateKey) {
	t.Helper()
	_, self, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	first, second := self, other
	if !admin {
		first, second = other, self
	}
	r, err := roster.New("acme", first, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(roster.Member{Key: proto.PubKeyOf(second), Name: "b", Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sign(first); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{key: self, r: r, sent: map[*peers.Link][]proto.FrameType{}}
	h.links = []*peers.Link{{Key: proto.PubKeyOf(other)}, {Key: proto.PubKeyOf(other)}}
	return h, other
}

func (h *fakeHost) Roster() *roster.Roster  { return h.r }
func (h *fakeHost) Self() proto.PubKey      { return proto.PubKeyOf(h.key) }
func (h *fakeHost) Key() ed25519.PrivateKey { return h.key }
func (h *fakeHost) Links() []*peers.Link    { return h.links }
func (h *fakeHost) ChannelsChanged()        { h.mu.Lock(); h.changed++; h.mu.Unlock() }
func (h *fakeHost) Count(c Counter)         { h.mu.Lock(); h.counts[c]++; h.mu.Unlock() }
func (h *fakeHost) Rejected(reason string) {
	h.mu.Lock()
	h.rejected = append(h.rejected, reason)
	h.mu.Unlock()
}
func (h *fakeHost) Refused(*peers.Link, error)            { h.mu.Lock(); h.refused++; h.mu.Unlock() }
func (h *fakeHost) QuotaLogAllowed(string) (bool, uint64) { return true, 0 }
func (h *fakeHost) SendFrame(pl *peers.Link, t proto.FrameType, _ []byte) {
	h.mu.Lock()
	h.sent[pl] = append(h.sent[pl], t)
	h.mu.Unlock()
}
func (h *fakeHost) ResolvePeer(q string) (roster.Member, error) {
	ms, err := h.r.Lookup(q)
	if err != nil || len(ms) != 1 {
		return roster.Member{}, apierr.NotFound("", "no member %q", q)
	}
	return ms[0], nil
}

func newAdmin(t *testing.T, h Host) (*Admin, Config) {
	t.Helper()
	home := t.TempDir()
	cfg := Config{Home: home, ChannelsDir: filepath.Join(home, "channels"), SenderRate: 60, SenderBurst: 2}
	if err := os.MkdirAll(cfg.ChannelsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	subs, err := channel.OpenSubscriptions(filepath.Join(home, "subscriptions.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(h, channel.NewSet(), subs, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a, cfg
}

// TestAdminOverHost drives the admin through its Host alone: an admin
// creates, edits and deletes a channel, each version persisted, recorded
// and flooded on every link; a peer's malformed policy and a rollback are
// counted and refused; a digest is answered with what the peer lacks;
// the block list follows a key rotation; the quota refuses past the
// burst.
func TestAdminOverHost(t *testing.T) {
	h, other := newFakeHost(t, true)
	a, cfg := newAdmin(t, h)

	p, err := a.CreateChannel(api.CreateChannel{Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(cfg.ChannelsDir); len(files) == 0 {
		t.Fatal("the new policy was not persisted")
	}
	for _, pl := range h.links {
		if got := h.sent[pl]; len(got) != 1 || got[0] != proto.FramePolicy {
			t.Fatalf("link got %v, want one policy frame", got)
		}
	}
	if h.counts[PolicyAccepted] != 1 || h.changed == 0 {
		t.Fatalf("accepted %d, channels changed %d", h.counts[PolicyAccepted], h.changed)
	}
	hours := 5
	c, err := a.UpdateChannel("ops", api.UpdateChannel{RetentionHours: &hours})
	if err != nil || c.Version != 2 || c.RetentionHours != 5 || len(c.Versions) != 2 {
		t.Fatalf("update: %+v %v", c, err)
	}

	// A rollback from a peer: refused, counted by reason, not logged as
	// a warning (a peer behind is normal).
	b, _ := p.Encode()
	a.HandleFrame(h.links[0], b)
	if len(h.rejected) != 1 || h.rejected[0] != "rollback" || h.refused != 0 {
		t.Fatalf("rollback: rejected %v, refused %d", h.rejected, h.refused)
	}
	a.HandleFrame(h.links[0], []byte{0xff})
	if h.counts[PolicyMalformed] != 1 || h.refused != 1 {
		t.Fatalf("malformed: counted %d, refused %d", h.counts[PolicyMalformed], h.refused)
	}
	// A peer that holds nothing is sent every policy.
	empty, _ := proto.Marshal(proto.PolicyDigest{})
	before := len(h.sent[h.links[1]])
	a.HandleDigest(h.links[1], empty)
	if got := h.sent[h.links[1]]; len(got) != before+1 || got[len(got)-1] != proto.FramePolicy {
		t.Fatalf("digest answered with %v", got[before:])
	}

	if _, err := a.DeleteChannel("ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetSubscription("ops", "subscribed"); !errors.Is(err, apierr.ErrForbidden) {
		t.Fatalf("subscribe to a deleted channel: %v", err)
	}

	// Blocks: by name; itself refused; carried to a member's new key.
	if _, err := a.SetBlock("b", true); err != nil || !a.Blocked(proto.PubKeyOf(other)) {
		t.Fatalf("block: %v", err)
	}
	if _, err := a.SetBlock(h.Self().String(), true); !errors.Is(err, apierr.ErrBadRequest) {
		t.Fatalf("block self: %v", err)
	}
	var next proto.PubKey
	next[0] = 9
	a.CarryBlock(proto.PubKeyOf(other), next, "b")
	if !a.Blocked(next) || len(a.Blocks().Blocks) != 2 {
		t.Fatalf("the block did not follow the new key: %+v", a.Blocks())
	}

	// The quota: a burst of two, then refused, tallied by sender.
	se := &proto.SignedEnvelope{Envelope: proto.Envelope{From: proto.PubKeyOf(other), To: proto.ToChannel(p.ID)}}
	now := time.Unix(1_700_000_000, 0)
	var over []bool
	for range 3 {
		over = append(over, a.OverQuota(se, false, now))
	}
	if over[0] || over[1] || !over[2] {
		t.Fatalf("over the quota: %v, want two messages of the burst taken, the third refused", over)
	}
	if q := a.QuotaRefused(h.r); len(q) != 1 || q[0].Name != "b" || q[0].Refused != 1 {
		t.Fatalf("quota refusals %+v", q)
	}
}

// TestEditsNeedAdmin: a node that is not a roster admin may not create,
// change or delete a channel.
func TestEditsNeedAdmin(t *testing.T) {
	h, _ := newFakeHost(t, false)
	a, _ := newAdmin(t, h)
	if _, err := a.CreateChannel(api.CreateChannel{Name: "ops"}); !errors.Is(err, apierr.ErrForbidden) {
		t.Fatalf("create by a member: %v", err)
	}
	if _, err := a.DeleteChannel("ops"); !errors.Is(err, apierr.ErrForbidden) {
		t.Fatalf("delete by a member: %v", err)
	}
}
