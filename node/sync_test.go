package node

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// newSyncMesh is newTestMesh (node 0 admin, the rest members) with the
// nodes listed in archive marked as archive nodes in the roster.
func newSyncMesh(t testing.TB, n int, archive ...int) *testMesh {
	t.Helper()
	m := newTestMeshWith(t, n, func(i int, mem *roster.Member) { mem.Archive = slices.Contains(archive, i) })
	for i := 0; i < n; i++ {
		m.writeRoster(i, m.roster)
	}
	return m
}

// startWith starts node i like start, with mod applied to its config.
func (m *testMesh) startWith(i int, mod func(*Config), seeds ...transport.Addr) *Node {
	m.t.Helper()
	return m.startHooked(i, nil, mod, seeds...)
}

// startHooked is startWith with the seams h (nil: none).
func (m *testMesh) startHooked(i int, h *testHooks, mod func(*Config), seeds ...transport.Addr) *Node {
	m.t.Helper()
	cfg := DefaultConfig()
	cfg.Home = m.home(i)
	cfg.MDNS = false
	cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
	cfg.Seeds = seeds
	cfg.DialBackoffMin = 50 * time.Millisecond
	cfg.DialBackoffMax = 500 * time.Millisecond
	cfg.SyncDelay = 50 * time.Millisecond
	cfg.Logger = testLogger(m.t)
	if mod != nil {
		mod(&cfg)
	}
	n, err := newTestNode(m.t, cfg, h)
	if err != nil {
		m.t.Fatalf("start node %d: %v", i, err)
	}
	return n
}

// channelIDs returns the ids of the channel's envelopes in n's store.
func channelIDs(t testing.TB, n *Node, ch uuid.UUID) map[uuid.UUID]bool {
	t.Helper()
	msgs, err := n.store.ChannelMessages(ch, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[uuid.UUID]bool, len(msgs))
	for _, m := range msgs {
		out[m.ID] = true
	}
	return out
}

func channelCount(n *Node, ch uuid.UUID) int {
	st, err := n.store.Stats()
	if err != nil {
		return -1
	}
	return st.Channels[ch]
}

// fillChannel stores count messages of about size bytes from n in its own
// history, as if n had sent them while nobody was linked.
func fillChannel(tb testing.TB, n *Node, ch uuid.UUID, count, size int) {
	tb.Helper()
	pad := strings.Repeat("x", size)
	var batch []*proto.SignedEnvelope
	for i := 0; i < count; i++ {
		se, err := n.out.Sign(proto.ToChannel(ch), proto.KindMessage, n.cfg.EnvelopeTTL, func(e *proto.Envelope) {
			e.Message = &proto.Message{Body: fmt.Sprintf("%06d %s", i, pad)}
		})
		if err != nil {
			tb.Fatal(err)
		}
		batch = append(batch, se)
		if len(batch) == 500 || i == count-1 {
			if _, err := n.store.PutBatch(batch, false); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func waitPolicy(t testing.TB, n *Node, name string) *channel.Policy {
	t.Helper()
	var p *channel.Policy
	waitFor(t, 10*time.Second, "policy #"+name, func() bool {
		var ok bool
		p, ok = n.chans.Set().ByName(name)
		return ok
	})
	return p
}

func sameSet(a, b map[uuid.UUID]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestCatchUpOnJoinAndOnReconnect: c learns #ch after 250 messages were
// sent and backfills them (join); then c goes away, 230 more flow, and c
// catches up on reconnect with its marks. Pages hold at most 100.
func TestCatchUpOnJoinAndOnReconnect(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "a-b link", func() bool { return linked(a, m.ids[1].Pub) })
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	for i := 0; i < 250; i++ {
		if _, err := a.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("first %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b has 250", func() bool { return channelCount(b, p.ID) == 250 })

	// c dials a's Unix socket: a TCP link would move to it (§14.12)
	// while the backfill runs, and this test pins the backfill's shape.
	c := m.startWith(2, nil, transport.Addr{Network: "unix", Address: a.home.LinkSocket()})
	waitFor(t, 15*time.Second, "c backfilled 250", func() bool { return channelCount(c, p.ID) == 250 })
	if !sameSet(channelIDs(t, c, p.ID), channelIDs(t, a, p.ID)) {
		t.Fatal("c's ids differ from a's")
	}
	waitFor(t, 10*time.Second, "the round recorded", func() bool { return len(roundsOf(c, p.ID)) > 0 })
	rounds := roundsOf(c, p.ID)
	if pr := rounds[0].Peers[0]; pr.Pages != 3 || pr.Delivered != 250 {
		t.Fatalf("backfill from the first peer: %+v, want 250 envelopes in 3 pages of 100", pr)
	}
	if c.metrics.Get("drop.expired") != 0 {
		t.Fatal("history envelopes went through the TTL check")
	}
	c.Close()

	for i := 0; i < 230; i++ {
		if _, err := a.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("second %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b has 480", func() bool { return channelCount(b, p.ID) == 480 })
	c = m.startWith(2, nil, tcpAddr(t, a))
	waitFor(t, 15*time.Second, "c caught up to 480", func() bool { return channelCount(c, p.ID) == 480 })
	if !sameSet(channelIDs(t, c, p.ID), channelIDs(t, b, p.ID)) {
		t.Fatal("c's ids differ from b's")
	}
	// Catching up again with marks asks only for what is missing.
	waitFor(t, 5*time.Second, "a round", func() bool { return len(roundsOf(c, p.ID)) > 0 })
	r := roundsOf(c, p.ID)[0]
	if r.Join {
		t.Fatal("reconnect round without marks")
	}
	got := 0
	for _, pr := range r.Peers {
		got += pr.Envelopes
	}
	if got > 230+10 {
		t.Fatalf("reconnect catch-up received %d envelopes for 230 missing", got)
	}
	// History envelopes are marked as such.
	st, err := c.store.ChannelMessages(p.ID, time.Time{}, 1)
	if err != nil || len(st) != 1 || !st[0].FromHistory {
		t.Fatalf("newest stored message: %+v, %v; want it from history", st, err)
	}
}

// BenchmarkCatchUp5000 measures how long a reader that holds the channel
// policy but none of its history takes, from New to the last of 5,000
// 1 KiB messages stored, catching up from one peer (pages of 100, 1 MiB):
// node start, link handshake, the default SyncDelay (200 ms), paging,
// verification and storage.
func BenchmarkCatchUp5000(b *testing.B) {
	const total = 5000
	m := newSyncMesh(b, 2)
	// Every iteration asks the same publisher for 50 pages; a generous
	// bucket keeps its pacing (HistoryServeRate) out of the measurement.
	a := m.startWith(0, func(c *Config) { c.HistoryServeBurst = 1 << 20 })
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	fillChannel(b, a, p.ID, total, 1000)
	// Let the reader learn the policy once, then drop its history.
	r := m.startWith(1, nil, tcpAddr(b, a))
	waitPolicy(b, r, "bench")
	if !testwait.Until(30*time.Second, func() bool { return channelCount(r, p.ID) == total }) {
		b.Fatalf("first catch-up: %d of %d; rounds %+v; metrics %v", channelCount(r, p.ID), total, roundsOf(r, p.ID), r.metrics.Snapshot())
	}
	r.Close()
	b.ResetTimer()
	var took time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := os.Remove(filepath.Join(m.home(1), "history.db")); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		r := m.startWith(1, func(c *Config) { c.SyncDelay = DefaultConfig().SyncDelay }, tcpAddr(b, a))
		if !testwait.Until(time.Minute, func() bool { return channelCount(r, p.ID) >= total }) {
			b.Fatalf("%d of %d after a minute", channelCount(r, p.ID), total)
		}
		took += time.Since(start)
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
	b.StopTimer()
	per := took / time.Duration(b.N)
	b.ReportMetric(per.Seconds(), "s/catchup")
	b.ReportMetric(total/per.Seconds(), "msgs/s")
}

// rawPeer is a roster member speaking to a node over a link of its own,
// to send crafted history envelopes and read what the node sends.
type rawPeer struct {
	t      *testing.T
	key    ed25519.PrivateKey
	node   proto.PubKey
	link   *transport.Link
	frames chan *proto.SignedEnvelope
	seq    uint64
	epoch  uuid.UUID
}

func dialRaw(t *testing.T, m *testMesh, i int, n *Node) *rawPeer {
	t.Helper()
	rp := &rawPeer{t: t, key: m.ids[i].Key, node: n.Identity(), frames: make(chan *proto.SignedEnvelope, 256), epoch: proto.NewEpoch()}
	cfg := transport.DefaultConfig()
	cfg.Identity = rp.key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: m.roster.Version} }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if rp.link, err = transport.Dial(ctx, tcpAddr(t, n), cfg, &rp.node); err != nil {
		t.Fatal(err)
	}
	rp.link.Start(func(f []byte) {
		if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameEnvelope {
			return
		}
		if se, err := proto.ParseEnvelope(f[1:]); err == nil {
			select {
			case rp.frames <- se:
			default:
			}
		}
	})
	t.Cleanup(func() { rp.link.Close() })
	waitFor(t, 5*time.Second, "raw link admitted", func() bool { return linked(n, m.ids[i].Pub) })
	return rp
}

// sign signs e as the raw peer, numbering it.
func (rp *rawPeer) sign(e *proto.Envelope) *proto.SignedEnvelope {
	rp.t.Helper()
	rp.seq++
	if e.ID == uuid.Nil {
		e.ID = proto.NewID()
	}
	e.From = proto.PubKeyOf(rp.key)
	if e.TS == 0 {
		e.TS = time.Now().UnixMilli()
	}
	if e.TTL == 0 {
		e.TTL = 300
	}
	if e.Seq == 0 {
		e.Seq, e.Epoch = rp.seq, rp.epoch
	}
	se, err := proto.SignEnvelope(rp.key, e)
	if err != nil {
		rp.t.Fatal(err)
	}
	return se
}

func (rp *rawPeer) send(se *proto.SignedEnvelope) {
	rp.t.Helper()
	if err := rp.link.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		rp.t.Fatal(err)
	}
}

// ask sends a HistoryRequest and returns the answer.
func (rp *rawPeer) ask(req proto.HistoryRequest) *proto.HistoryResponse {
	rp.t.Helper()
	se := rp.sign(&proto.Envelope{To: proto.ToPeer(rp.node), Kind: proto.KindHistoryRequest, HistoryRequest: &req})
	rp.send(se)
	for {
		got := rp.expect(proto.KindHistoryResponse, 5*time.Second)
		if got.HistoryResponse.InReplyTo == se.ID {
			return got.HistoryResponse
		}
	}
}

// expect returns the next envelope of kind the node sends.
func (rp *rawPeer) expect(kind proto.Kind, within time.Duration) *proto.SignedEnvelope {
	rp.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case se := <-rp.frames:
			if se.Kind == kind {
				return se
			}
		case <-deadline:
			rp.t.Fatalf("no %s from the node within %v", kind, within)
			return nil
		}
	}
}

func pageIDs(t *testing.T, msgs [][]byte) ([]*proto.SignedEnvelope, int) {
	t.Helper()
	var out []*proto.SignedEnvelope
	size := 0
	for _, raw := range msgs {
		se, err := proto.ParseEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := se.Verify(); err != nil {
			t.Fatal(err)
		}
		out = append(out, se)
		size += len(raw)
	}
	return out, size
}

// TestSyncAsksRecentWritersFirst: the requester asks the peer most
// recently active in the channel first, then, as the fallback, the
// archive peer, then the admin.
func TestSyncAsksRecentWritersFirst(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 4, 1) // b is an archive node
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	c := m.startWith(2, nil, tcpAddr(t, a))
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	waitPolicy(t, c, "ch")
	// The links settle on the Unix sockets first (§14.12): this test is
	// about the order of d's round, not about traffic during a move.
	waitFor(t, 10*time.Second, "b-c link on the Unix socket", func() bool {
		return linkNetwork(b, m.ids[2].Pub) == "unix" && linkNetwork(c, m.ids[1].Pub) == "unix" &&
			linkNetwork(a, m.ids[2].Pub) == "unix" && linkNetwork(a, m.ids[1].Pub) == "unix"
	})
	for i := 0; i < 20; i++ { // c is the active writer; a writes nothing
		if _, err := c.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("c %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "a and b have 20", func() bool { return channelCount(a, p.ID) == 20 && channelCount(b, p.ID) == 20 })

	d := m.startWith(3, func(c *Config) { c.SyncInterval = -1 }, tcpAddr(t, a), tcpAddr(t, b), tcpAddr(t, c))
	waitFor(t, 10*time.Second, "d linked to all and caught up", func() bool {
		return len(d.Backend().PeerList()) == 3 && channelCount(d, p.ID) == 20
	})
	marked := time.Now()
	d.rx.Sync.MarkDue(p.ID, false)
	r := roundAfter(t, d, p.ID, marked, 10*time.Second)
	var order []proto.PubKey
	for _, pr := range r.Peers {
		order = append(order, pr.Peer)
	}
	want := []proto.PubKey{m.ids[2].Pub, m.ids[1].Pub, m.ids[0].Pub}
	if !slices.Equal(order, want) || r.Peers[0].Archive || !r.Peers[1].Archive {
		t.Fatalf("asked %v, want active c, then archive b, then admin a (%v)", order, want)
	}
}

// Catch-up pages that repeat what a node holds (a join round asks without
// marks) are counted as sync.already_held, not as dropped duplicates.
func TestCatchUpOverlapIsNotADrop(t *testing.T) {
	t.Parallel()
	_, a, b, p := channelPair(t)
	for i := 0; i < 5; i++ {
		if _, err := a.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("held %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b holds 5", func() bool { return channelCount(b, p.ID) == 5 })
	// Let the rounds the policy and the link started finish.
	waitFor(t, 10*time.Second, "b's syncer idle", func() bool { return syncIdle(b) })
	dups, held := b.metrics.Get("drop.duplicate"), b.metrics.Get("sync.already_held")
	b.rx.Sync.MarkDue(p.ID, true) // as after a join: asked without marks
	waitFor(t, 10*time.Second, "overlap counted", func() bool { return b.metrics.Get("sync.already_held") >= held+5 })
	if d := b.metrics.Get("drop.duplicate"); d != dups {
		t.Fatalf("drop.duplicate went from %d to %d on a catch-up overlap", dups, d)
	}
	if got := channelCount(b, p.ID); got != 5 {
		t.Fatalf("b holds %d, want 5", got)
	}
}

// A channel message goes out while the sender commits it; when the commit
// fails, the call fails and says the message went out anyway.
func TestSendCommitFailureSaysItWentOut(t *testing.T) {
	t.Parallel()
	_, a, b, p := channelPair(t)
	// The first send reserves a block of sequence numbers, so the next
	// needs no store write before its commit.
	if _, err := a.out.Send(api.Send{To: "#ch", Body: "kept"}); err != nil {
		t.Fatal(err)
	}
	a.store.Close() // as a store that can no longer write
	_, err := a.out.Send(api.Send{To: "#ch", Body: "out, not kept"})
	if err == nil || !strings.Contains(err.Error(), "went to 1 peers") {
		t.Fatalf("send with a failing store: %v", err)
	}
	if a.Backend().Counters()["tx.store_failed"] != 1 {
		t.Fatalf("tx.store_failed = %d", a.Backend().Counters()["tx.store_failed"])
	}
	waitFor(t, 5*time.Second, "b has both", func() bool { return channelCount(b, p.ID) == 2 })
}

// A node that fetches its own channel messages back through catch-up
// (after losing its store) keeps them as history, not as mail.
func TestOwnMessagesFromCatchUpAreNotMail(t *testing.T) {
	t.Parallel()
	m, a, b, p := channelPair(t)
	if _, err := b.chans.SetSubscription("ch", "subscribed"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := b.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("mine %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "a has 3", func() bool { return channelCount(a, p.ID) == 3 })
	b.Close()
	if err := os.Remove(filepath.Join(m.home(1), "history.db")); err != nil {
		t.Fatal(err)
	}
	b = m.startWith(1, nil, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "b has its 3 back", func() bool { return channelCount(b, p.ID) == 3 })
	in, err := b.q.Inbox(context.Background(), true, 0, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Items) != 0 {
		t.Fatalf("b's inbox holds %d of its own messages: %+v", len(in.Items), in.Items[0])
	}
}
