package ownpresence

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
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost is a one-member org with one link, recording the frames sent
// and the events counted.
type fakeHost struct {
	key     ed25519.PrivateKey
	r       *roster.Roster
	link    *peers.Link
	mu      sync.Mutex
	frames  []proto.FrameType
	counts  [NumCounters]int
	changes []proto.PresenceState
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	r, err := roster.New("acme", key, "a")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeHost{key: key, r: r, link: &peers.Link{}}
}

func (h *fakeHost) Roster() *roster.Roster { return h.r }
func (h *fakeHost) Self() proto.PubKey     { return proto.PubKeyOf(h.key) }
func (h *fakeHost) Links() []*peers.Link   { return []*peers.Link{h.link} }
func (h *fakeHost) Party(k proto.PubKey) api.Party {
	return api.Party{Key: k, Fingerprint: k.Fingerprint()}
}
func (h *fakeHost) Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	e := &proto.Envelope{ID: proto.NewID(), From: h.Self(), To: to, Kind: kind, TS: time.Now().UnixMilli(), TTL: uint32(ttl / time.Second),
		Seq: 1, Epoch: proto.NewEpoch()}
	fill(e)
	return proto.SignEnvelope(h.key, e)
}
func (h *fakeHost) SendFrame(_ *peers.Link, t proto.FrameType, _ []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames = append(h.frames, t)
}
func (h *fakeHost) Count(c Counter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[c]++
}
func (h *fakeHost) Changed(st proto.PresenceState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, st)
}

// TestAnnouncerOverHost: the announcer works over its Host alone: a
// presence set with a note is announced at once as the pair of frames
// (the plain envelope, then the noted one), counted as a change and a
// send, recorded in the shared table and shown in the rendered one; bad
// input is refused with a 400; Offline at shutdown is one plain frame;
// a nil announcer (a node whose start failed) says nothing.
func TestAnnouncerOverHost(t *testing.T) {
	h := newFakeHost(t)
	cfg := Config{PresenceTTL: time.Minute, PresenceAwayAfter: time.Hour, PresenceOfflineAfter: 2 * time.Hour, MaxTTL: 144 * time.Hour}
	a := New(h, cfg, presence.NewTable(cfg.PresenceTTL), slog.New(slog.NewTextHandler(io.Discard, nil)))

	note := "running tests"
	tab, err := a.SetPresence(api.SetPresence{State: "away", Note: &note})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.frames) != 2 || h.frames[0] != proto.FrameEnvelope || h.frames[1] != proto.FramePresenceNote {
		t.Fatalf("frames of an announcement with a note: %v", h.frames)
	}
	if h.counts[Sent] != 1 || len(h.changes) != 1 || h.changes[0] != proto.Away {
		t.Fatalf("counted: sent %d, changes %v", h.counts[Sent], h.changes)
	}
	if len(tab.Entries) != 1 || !tab.Entries[0].Self || tab.Entries[0].State != "away" || tab.Entries[0].Note != note ||
		tab.Agent.Source != presenceFromOverride {
		t.Fatalf("table after presence set: %+v (agent %+v)", tab.Entries, tab.Agent)
	}
	if _, err := a.SetPresence(api.SetPresence{}); !errors.Is(err, apierr.ErrBadRequest) {
		t.Fatalf("presence set with nothing: %v", err)
	}
	if _, err := a.SetPresence(api.SetPresence{State: "away", ForSeconds: int(MaxOverride/time.Second) + 1}); !errors.Is(err, apierr.ErrBadRequest) {
		t.Fatalf("presence set past the longest override: %v", err)
	}

	h.frames = nil
	a.AnnounceOffline(a.host.Links())
	if len(h.frames) != 1 || h.frames[0] != proto.FrameEnvelope {
		t.Fatalf("frames at shutdown: %v", h.frames)
	}
	var none *Announcer
	none.AnnounceOffline(a.host.Links())

	if got := Lifetime(90*time.Second+time.Millisecond, time.Hour); got != 91*time.Second {
		t.Fatalf("lifetime of a presence_ttl of 90.001 s: %v", got)
	}
	if got := Lifetime(300*time.Hour, 144*time.Hour); got != 144*time.Hour {
		t.Fatalf("lifetime past the dedupe horizon: %v", got)
	}
}
