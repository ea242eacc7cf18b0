package cards

import (
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost is a node of a two-member roster with two links, recording
// what the book sends, counts and refuses.
type fakeHost struct {
	self    ed25519.PrivateKey
	r       *roster.Roster
	links   []*peers.Link
	mu      sync.Mutex
	sent    map[*peers.Link]int
	counts  [NumCounters]int
	refused []Reason
}

func newFakeHost(t *testing.T) (*fakeHost, ed25519.PrivateKey) {
	t.Helper()
	_, self, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	r, err := roster.New("acme", self, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(roster.Member{Key: proto.PubKeyOf(other), Name: "b", Role: roster.RoleMember}); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{self: self, r: r, sent: map[*peers.Link]int{},
		links: []*peers.Link{{Key: proto.PubKeyOf(other)}, {Key: proto.PubKeyOf(other)}}}
	return h, other
}

func (h *fakeHost) Roster() *roster.Roster       { return h.r }
func (h *fakeHost) Self() proto.PubKey           { return proto.PubKeyOf(h.self) }
func (h *fakeHost) SignCard(c *proto.Card) error { return proto.SignCard(c, h.self) }
func (h *fakeHost) Links() []*peers.Link         { return h.links }
func (h *fakeHost) Party(k proto.PubKey) api.Party {
	m, _ := h.r.Member(k)
	return api.Party{Key: k, Fingerprint: k.Fingerprint(), Name: m.Name}
}
func (h *fakeHost) Presence(proto.PubKey, time.Time) (proto.PresenceState, bool) {
	return proto.Online, true
}
func (h *fakeHost) ResolvePeer(q string) (proto.PubKey, error) {
	for _, m := range h.r.Members {
		if m.Name == q {
			return m.Key, nil
		}
	}
	return proto.PubKey{}, apierr.NotFound("", "no roster member matches %q", q)
}
func (h *fakeHost) SendFrame(pl *peers.Link, t proto.FrameType, _ []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t == proto.FrameCard {
		h.sent[pl]++
	}
}
func (h *fakeHost) Count(c Counter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[c]++
}
func (h *fakeHost) Refused(_ *peers.Link, r Reason, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused = append(h.refused, r)
}

// TestBookOverHost: the book works over its Host alone: a peer's
// card is taken and flooded to every other link, a non-member's is
// refused, this node's own card is signed and published to every link,
// and the control API's reads answer from the store, naming a missing
// card with a 404 and a hint.
func TestBookOverHost(t *testing.T) {
	h, other := newFakeHost(t)
	s := New(h, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	from := h.links[0]

	c := &proto.Card{Version: 7, Description: "runner", Intents: []proto.CardIntent{{Name: "run-tests"}}}
	if err := proto.SignCard(c, other); err != nil {
		t.Fatal(err)
	}
	s.HandleFrame(from, c.Raw)
	if h.counts[Accepted] != 1 || h.sent[from] != 0 || h.sent[h.links[1]] != 1 {
		t.Fatalf("peer's card: accepted %d, sent back %d, sent on %d", h.counts[Accepted], h.sent[from], h.sent[h.links[1]])
	}
	_, outsider, _ := ed25519.GenerateKey(nil)
	bad := &proto.Card{Version: 1}
	if err := proto.SignCard(bad, outsider); err != nil {
		t.Fatal(err)
	}
	s.HandleFrame(from, bad.Raw)
	if len(h.refused) != 1 || h.refused[0] != NotMember {
		t.Fatalf("non-member's card: refused %v", h.refused)
	}

	if _, err := s.CardOf(""); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("own card before any is set: %v", err)
	}
	own, err := s.SetCard(api.CardInput{Description: "me"})
	if err != nil || !own.Self || own.Presence != "online" {
		t.Fatalf("set: %+v %v", own, err)
	}
	if h.sent[from] != 1 || h.sent[h.links[1]] != 2 {
		t.Fatalf("own card not sent to every link: %v", h.sent)
	}
	if got, err := s.CardOf("b"); err != nil || got.Version != 7 || got.Intents[0].Name != "run-tests" {
		t.Fatalf("b's card: %+v %v", got, err)
	}
	if l := s.CardList("run-tests"); len(l.Cards) != 1 || l.Cards[0].Name != "b" {
		t.Fatalf("cards for run-tests: %+v", l)
	}
}
