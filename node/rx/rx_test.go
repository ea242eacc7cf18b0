package rx

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost records what the pipeline tells the node.
type fakeHost struct {
	mu        sync.Mutex
	counts    [NumCounters]uint64
	drops     [NumDrops]int
	delivered []*proto.SignedEnvelope
	wakes     int
}

func (h *fakeHost) Count(c Counter, d uint64) { h.mu.Lock(); h.counts[c] += d; h.mu.Unlock() }
func (h *fakeHost) CountDrop(r Drop)          { h.mu.Lock(); h.drops[r]++; h.mu.Unlock() }
func (h *fakeHost) CountDelivered(proto.Kind) {}
func (h *fakeHost) AdmitAttachments(b []Item) []Item {
	return b
}
func (h *fakeHost) Delivered(se *proto.SignedEnvelope, _ history.Priority, _, _ bool, _ time.Time) {
	h.mu.Lock()
	h.delivered = append(h.delivered, se)
	h.mu.Unlock()
}
func (h *fakeHost) Notify(wake bool) {
	if wake {
		h.mu.Lock()
		h.wakes++
		h.mu.Unlock()
	}
}

func (h *fakeHost) drop(r Drop) int { h.mu.Lock(); defer h.mu.Unlock(); return h.drops[r] }

// fakeDeps are the components the pipeline asks on every envelope.
type fakeDeps struct {
	r       *roster.Roster
	set     *channel.Set
	subs    *channel.Subscriptions
	blocked proto.PubKey
	mu      sync.Mutex
	acked   []uuid.UUID
}

func (d *fakeDeps) Current() *roster.Roster                                     { return d.r }
func (d *fakeDeps) ObserveFutureClock(proto.PubKey, time.Time, bool, time.Time) {}
func (d *fakeDeps) ObserveClock(proto.PubKey, time.Time, bool, time.Time)       {}
func (d *fakeDeps) Set() *channel.Set                                           { return d.set }
func (d *fakeDeps) Subscriptions() *channel.Subscriptions                       { return d.subs }
func (d *fakeDeps) OverQuota(*proto.SignedEnvelope, bool, time.Time) bool       { return false }
func (d *fakeDeps) Blocked(k proto.PubKey) bool                                 { return k == d.blocked }
func (d *fakeDeps) Ackable(se *proto.SignedEnvelope, _ *peers.Link, _ bool) bool {
	return se.To.Kind == proto.DestPeer
}
func (d *fakeDeps) NoteRequest(*proto.SignedEnvelope)   {}
func (d *fakeDeps) NoteReply(uuid.UUID, *proto.Message) {}
func (d *fakeDeps) SendAcks(acks map[*peers.Link][]uuid.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ids := range acks {
		d.acked = append(d.acked, ids...)
	}
}

func (d *fakeDeps) ackCount() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.acked) }

// fakeSyncHost is history sync's host; the test sends it nothing.
type fakeSyncHost struct{ d *fakeDeps }

func (h fakeSyncHost) Roster() *roster.Roster          { return h.d.r }
func (h fakeSyncHost) LinkTo(proto.PubKey) *peers.Link { return nil }
func (h fakeSyncHost) Links() []*peers.Link            { return nil }
func (h fakeSyncHost) Sign(proto.Destination, proto.Kind, time.Duration, func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	return nil, context.Canceled
}
func (h fakeSyncHost) Drop(syncer.Drop, *proto.SignedEnvelope, syncer.Source, error) {}
func (h fakeSyncHost) Count(syncer.Counter, uint64)                                  {}
func (h fakeSyncHost) CountRefused(bool, proto.HistoryStatus)                        {}

func key(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func dm(t *testing.T, from ed25519.PrivateKey, to proto.PubKey) []byte {
	t.Helper()
	se, err := proto.SignEnvelope(from, &proto.Envelope{
		ID: proto.NewID(), From: proto.PubKeyOf(from), To: proto.ToPeer(to), Kind: proto.KindMessage,
		TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(), Message: &proto.Message{Body: "hello"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return se.Raw
}

// TestPipelineOverHost drives a pipeline through its Host and the small
// interfaces of the components it asks: a DM is stored, acknowledged
// and handed to the consumers; its replay, a stranger's DM and garbage
// are dropped with their reasons; a blocked member's DM is stored and
// acknowledged but kept out of the inbox.
func TestPipelineOverHost(t *testing.T) {
	dir := t.TempDir()
	self, b, c, stranger := key(t), key(t), key(t), key(t)
	r, err := roster.New("acme", self, "a")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []ed25519.PrivateKey{b, c} {
		if err := r.Add(roster.Member{Key: proto.PubKeyOf(k), Role: roster.RoleMember, Name: string(rune('b' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := history.Open(filepath.Join(dir, "history.db"), history.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	subs, err := channel.OpenSubscriptions(filepath.Join(dir, "subscriptions.json"))
	if err != nil {
		t.Fatal(err)
	}
	deps := &fakeDeps{r: r, set: channel.NewSet(), subs: subs, blocked: proto.PubKeyOf(c)}
	h := &fakeHost{}
	var observed sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	selfPub := proto.PubKeyOf(self)
	p := New(ctx, h, Config{
		Self: selfPub, Store: st, Roster: deps, Presence: presence.NewTable(time.Minute), Clock: deps, Chans: deps, Acks: deps,
		Sync: syncer.Params{Host: fakeSyncHost{deps}, Self: selfPub, Store: st, Channels: deps.set, Subs: subs,
			Config: syncer.Config{SyncInterval: time.Hour, SyncDelay: time.Hour, SyncTimeout: time.Second}},
		Observe: func(*proto.SignedEnvelope, time.Time) { observed.Done() },
	})
	var wg sync.WaitGroup
	p.Start(wg.Go)
	defer func() { cancel(); p.Close(); wg.Wait() }()

	good := dm(t, b, selfPub)
	observed.Add(1)
	if !p.Receive(good, Source{}) {
		t.Fatalf("member's DM refused: drops %v", h.drops)
	}
	observed.Wait()
	testwait.For(t, 5*time.Second, "the DM acknowledged once stored", func() bool { return deps.ackCount() == 1 })
	if h.counts[Commits] != 1 || h.counts[InboxItems] != 1 || len(h.delivered) != 1 || h.wakes != 1 {
		t.Fatalf("after the DM: counts %v, delivered %d, wakes %d", h.counts, len(h.delivered), h.wakes)
	}

	if p.Receive(good, Source{}) || h.drop(DropDuplicate) != 1 || deps.ackCount() != 2 {
		t.Fatalf("replay: duplicates %d, acks %d", h.drop(DropDuplicate), deps.ackCount())
	}
	if p.Receive(dm(t, stranger, selfPub), Source{}) || h.drop(DropNotMember) != 1 {
		t.Fatalf("stranger's DM: not_member %d", h.drop(DropNotMember))
	}
	if p.Receive([]byte{0xa2, 0x00, 0x41}, Source{}) || h.drop(DropMalformed) != 1 {
		t.Fatalf("garbage: malformed %d", h.drop(DropMalformed))
	}

	if !p.Receive(dm(t, c, selfPub), Source{}) {
		t.Fatal("blocked member's DM refused before the commit stage")
	}
	testwait.For(t, 5*time.Second, "the blocked member's DM stored", func() bool { return h.drop(DropBlocked) == 1 })
	testwait.For(t, 5*time.Second, "the blocked member's DM acknowledged", func() bool { return deps.ackCount() == 3 })
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.delivered) != 1 || h.counts[Received] != 5 {
		t.Fatalf("blocked DM reached the inbox (%d delivered) or receptions miscounted (%d)", len(h.delivered), h.counts[Received])
	}
}
