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
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/syncer"
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
		se, err := n.sign(proto.ToChannel(ch), proto.KindMessage, n.cfg.EnvelopeTTL, func(e *proto.Envelope) {
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
		p, ok = n.channels.ByName(name)
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
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "a-b link", func() bool { return linked(a, m.ids[1].Pub) })
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	for i := 0; i < 250; i++ {
		if _, err := a.Send(api.Send{To: "#ch", Body: fmt.Sprintf("first %d", i)}); err != nil {
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
		if _, err := a.Send(api.Send{To: "#ch", Body: fmt.Sprintf("second %d", i)}); err != nil {
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
	p, err := a.CreateChannel(api.CreateChannel{Name: "bench"})
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

// TestServeHistoryPagingAtLimits checks the answers to HistoryRequests at
// and around max_messages and max_bytes, and that paging with `more`
// returns every message once.
func TestServeHistoryPagingAtLimits(t *testing.T) {
	m := newSyncMesh(t, 2)
	a := m.startWith(0, nil)
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	fillChannel(t, a, p.ID, 250, 1000)
	want := channelIDs(t, a, p.ID)
	rp := dialRaw(t, m, 1, a)
	base := proto.HistoryRequest{ChannelID: p.ID, SinceTS: time.Now().Add(-time.Hour).UnixMilli(), MaxMessages: 100, MaxBytes: proto.MaxHistoryBytes}

	// Paging by 100: 100 + more, 100 + more, 50 without more.
	got := map[uuid.UUID]bool{}
	req := base
	var sizes []int
	for {
		resp := rp.ask(req)
		if resp.Status != proto.HistoryOK {
			t.Fatalf("status %s", resp.Status)
		}
		page, _ := pageIDs(t, resp.Messages)
		sizes = append(sizes, len(page))
		for _, se := range page {
			if got[se.ID] {
				t.Fatalf("envelope %s served twice", se.ID)
			}
			got[se.ID] = true
		}
		if !resp.More {
			break
		}
		req = *history.NextHistoryRequest(&req, page)
	}
	if !slices.Equal(sizes, []int{100, 100, 50}) || !sameSet(got, want) {
		t.Fatalf("pages %v, %d ids (want [100 100 50], all 250)", sizes, len(got))
	}

	// Exactly at the count: all 250 and no more; one below: more.
	req = base
	req.MaxMessages = 250
	if resp := rp.ask(req); len(resp.Messages) != 250 || resp.More {
		t.Fatalf("max_messages 250: %d messages, more %v", len(resp.Messages), resp.More)
	}
	req.MaxMessages = 249
	if resp := rp.ask(req); len(resp.Messages) != 249 || !resp.More {
		t.Fatalf("max_messages 249: %d messages, more %v", len(resp.Messages), resp.More)
	}

	// The byte limit: five envelopes' worth, exactly, then one byte less.
	req = base
	first, _ := pageIDs(t, rp.ask(proto.HistoryRequest{ChannelID: p.ID, SinceTS: base.SinceTS, MaxMessages: 5, MaxBytes: proto.MaxHistoryBytes}).Messages)
	five := 0
	for _, se := range first {
		five += len(se.Raw)
	}
	req.MaxBytes = uint32(five)
	page, size := pageIDs(t, rp.ask(req).Messages)
	if len(page) != 5 || size > five {
		t.Fatalf("max_bytes %d: %d messages of %d bytes, want 5", five, len(page), size)
	}
	req.MaxBytes = uint32(five - 1)
	resp := rp.ask(req)
	page, size = pageIDs(t, resp.Messages)
	if len(page) != 4 || size > five-1 || !resp.More {
		t.Fatalf("max_bytes %d: %d messages of %d bytes, more %v; want 4 and more", five-1, len(page), size, resp.More)
	}
	// History requests and responses are never stored.
	// The server counts a page after sending it: wait for the last one.
	waitFor(t, 5*time.Second, "history.served >= 8", func() bool { return a.metrics.Get("history.served") >= 8 })
	st, _ := a.store.Stats()
	if st.Direct != 0 {
		t.Fatalf("%d direct envelopes stored; history exchanges must not be", st.Direct)
	}
}

// TestServeHistoryRefusals: history disabled by the policy, a requester
// that may not read, and an unknown channel get their statuses and no
// messages; a node never asks for a channel whose history is disabled.
func TestServeHistoryRefusals(t *testing.T) {
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	quiet, err := a.CreateChannel(api.CreateChannel{Name: "quiet", NoHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := a.CreateChannel(api.CreateChannel{Name: "secret", Readers: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	fillChannel(t, a, quiet.ID, 10, 10)
	fillChannel(t, a, secret.ID, 10, 10)
	rp := dialRaw(t, m, 1, a)
	since := time.Now().Add(-time.Hour).UnixMilli()
	for _, tc := range []struct {
		ch   uuid.UUID
		want proto.HistoryStatus
	}{
		{quiet.ID, proto.HistoryDisabled},
		{secret.ID, proto.HistoryDenied},
		{proto.NewID(), proto.HistoryUnknownChannel},
	} {
		resp := rp.ask(proto.HistoryRequest{ChannelID: tc.ch, SinceTS: since, MaxMessages: 100, MaxBytes: proto.MaxHistoryBytes})
		if resp.Status != tc.want || len(resp.Messages) != 0 || resp.More {
			t.Errorf("channel %s: status %q with %d messages, want %q and none", tc.ch, resp.Status, len(resp.Messages), tc.want)
		}
	}
	for _, k := range []string{"history.refused.disabled", "history.refused.denied", "history.refused.unknown_channel"} {
		if a.metrics.Get(k) != 1 {
			t.Errorf("%s = %d, want 1", k, a.metrics.Get(k))
		}
	}
	// A reader that knows #quiet never asks for its history.
	c := m.startWith(2, nil, tcpAddr(t, a))
	waitPolicy(t, c, "quiet")
	time.Sleep(500 * time.Millisecond) // deliberate: no request may come in this window
	if n := a.metrics.Get("history.refused.disabled"); n != 1 {
		t.Fatalf("a refused %d requests for #quiet, want only the raw one", n)
	}
	if len(roundsOf(c, quiet.ID)) != 0 {
		t.Fatal("c ran a round for #quiet")
	}
}

// TestHistoryResponseAdmission: a response is taken only as the answer
// to a request of ours, from the peer asked; nested envelopes must be
// channel Messages of the channel asked for; limits are enforced.
func TestHistoryResponseAdmission(t *testing.T) {
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) { c.SyncPageMessages = 4; c.SyncInterval = -1; c.SyncTimeout = 2 * time.Second })
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.CreateChannel(api.CreateChannel{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	rp := dialRaw(t, m, 1, a)
	// a asks the new link for both channels (in id order).
	var req *proto.SignedEnvelope
	for req == nil {
		se := rp.expect(proto.KindHistoryRequest, 5*time.Second)
		if se.HistoryRequest.ChannelID == p.ID {
			req = se
		} else {
			rp.send(rp.sign(&proto.Envelope{To: proto.ToPeer(rp.node), Kind: proto.KindHistoryResponse,
				HistoryResponse: &proto.HistoryResponse{ChannelID: se.HistoryRequest.ChannelID, InReplyTo: se.ID, Status: proto.HistoryOK}}))
		}
	}
	if hr := req.HistoryRequest; hr.MaxMessages != 4 || hr.MaxBytes != proto.MaxHistoryBytes {
		t.Fatalf("request limits %d/%d", hr.MaxMessages, hr.MaxBytes)
	}
	respond := func(inReplyTo, ch uuid.UUID, msgs ...*proto.SignedEnvelope) *proto.SignedEnvelope {
		h := &proto.HistoryResponse{ChannelID: ch, InReplyTo: inReplyTo, Status: proto.HistoryOK}
		for _, se := range msgs {
			h.Messages = append(h.Messages, se.Raw)
		}
		se := rp.sign(&proto.Envelope{To: proto.ToPeer(rp.node), Kind: proto.KindHistoryResponse, HistoryResponse: h})
		rp.send(se)
		return se
	}
	msg := func(to proto.Destination, ts time.Time) *proto.SignedEnvelope {
		return rp.sign(&proto.Envelope{To: to, Kind: proto.KindMessage, TS: ts.UnixMilli(), Message: &proto.Message{Body: "from history"}})
	}
	// Unsolicited: an unknown request id, and the right id for another channel.
	respond(proto.NewID(), p.ID)
	respond(req.ID, other.ID)
	waitFor(t, 5*time.Second, "unsolicited drops", func() bool { return a.metrics.Get("drop.history_unsolicited") == 2 })

	good := msg(proto.ToChannel(p.ID), time.Now())
	old := msg(proto.ToChannel(p.ID), time.Now().Add(-2*time.Hour)) // long expired: history skips the TTL check
	dm := msg(proto.ToPeer(rp.node), time.Now())
	elsewhere := msg(proto.ToChannel(other.ID), time.Now())
	answer := respond(req.ID, p.ID, good, old, dm, elsewhere)
	waitFor(t, 5*time.Second, "good envelopes stored", func() bool { return channelCount(a, p.ID) == 2 })
	if got := a.metrics.Get("drop.history_foreign"); got != 2 {
		t.Fatalf("drop.history_foreign = %d, want 2", got)
	}
	for _, se := range []*proto.SignedEnvelope{dm, elsewhere, req, answer} {
		if _, err := a.store.Get(se.From, se.ID); err == nil {
			t.Fatalf("%s %s was stored", se.Kind, se.ID)
		}
	}
	st, err := a.store.Get(old.From, old.ID)
	if err != nil || !st.FromHistory {
		t.Fatalf("old envelope: %+v, %v; want it stored, from history", st, err)
	}
	// The same answer again is not taken: the request is answered.
	rp.send(answer)
	waitFor(t, 5*time.Second, "replayed answer dropped", func() bool { return a.metrics.Get("drop.history_unsolicited") == 3 })

	// An answer over the limits asked for is dropped whole.
	a.syncer.MarkDue(p.ID, false)
	var five []*proto.SignedEnvelope
	for range 5 {
		five = append(five, msg(proto.ToChannel(p.ID), time.Now()))
	}
	for {
		// Join and link-up rounds of both channels may be asking too.
		se := rp.expect(proto.KindHistoryRequest, 5*time.Second)
		if ch := se.HistoryRequest.ChannelID; ch != p.ID {
			respond(se.ID, ch)
			continue
		}
		respond(se.ID, p.ID, five...)
		break
	}
	waitFor(t, 5*time.Second, "over-limit drop", func() bool { return a.metrics.Get("drop.history_over_limit") == 1 })
	// A live message sent after the answer is stored after it would
	// have been: then none of the five is.
	live := msg(proto.ToChannel(p.ID), time.Now())
	rp.send(live)
	waitFor(t, 5*time.Second, "the later live message stored", func() bool {
		_, err := a.store.Get(live.From, live.ID)
		return err == nil
	})
	for _, se := range five {
		if _, err := a.store.Get(se.From, se.ID); err == nil {
			t.Fatalf("%s of the over-limit answer was stored", se.ID)
		}
	}
	if n := channelCount(a, p.ID); n != 3 {
		t.Fatalf("%d envelopes stored after an over-limit answer and a live message, want 3", n)
	}
	// Neither kind reached the inbox.
	in, err := a.store.Inbox(history.InboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in {
		if it.Kind == proto.KindHistoryRequest || it.Kind == proto.KindHistoryResponse {
			t.Fatalf("%s in the inbox", it.Kind)
		}
	}
}

// TestServeHistoryLimitsPerPeer: a peer firing requests gets at most
// HistoryServeConcurrency served at once, paced by the token bucket, and
// a replayed request is not served again.
func TestServeHistoryLimitsPerPeer(t *testing.T) {
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) {
		c.HistoryServeConcurrency = 1
		c.HistoryServeRate = 1 // the burst below comes well within a second of the first answer
		c.HistoryServeBurst = 1
	})
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	fillChannel(t, a, p.ID, 20, 100)
	rp := dialRaw(t, m, 1, a)
	req := proto.HistoryRequest{ChannelID: p.ID, SinceTS: time.Now().Add(-time.Hour).UnixMilli(), MaxMessages: 100, MaxBytes: proto.MaxHistoryBytes}
	// One answered: it takes the only token.
	rp.ask(req)
	waitFor(t, 5*time.Second, "the slot released", func() bool { return a.syncer.Serving(m.ids[1].Pub) == 0 })
	// Now a burst: the first waits for a token holding the one slot, the
	// rest are dropped.
	var sent []*proto.SignedEnvelope
	for range 5 {
		se := rp.sign(&proto.Envelope{To: proto.ToPeer(rp.node), Kind: proto.KindHistoryRequest, HistoryRequest: &req})
		rp.send(se)
		sent = append(sent, se)
	}
	testwait.Until(5*time.Second, func() bool { return a.metrics.Get("drop.history_busy") >= 4 })
	if busy := a.metrics.Get("drop.history_busy"); busy != 4 {
		t.Fatalf("drop.history_busy = %d (paced %d, served %d), want 4", busy,
			a.metrics.Get("history.serve_paced"), a.metrics.Get("history.served"))
	}
	start := time.Now()
	got := rp.expect(proto.KindHistoryResponse, 5*time.Second)
	if got.HistoryResponse.InReplyTo != sent[0].ID || a.metrics.Get("history.serve_paced") == 0 {
		t.Fatalf("paced answer to %s (paced %d)", got.HistoryResponse.InReplyTo, a.metrics.Get("history.serve_paced"))
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("paced answer after %v", el)
	}
	// A replay of an answered request is dropped.
	dups := a.metrics.Get("drop.duplicate")
	rp.send(sent[0])
	waitFor(t, 5*time.Second, "replay dropped", func() bool { return a.metrics.Get("drop.duplicate") == dups+1 })
}

// TestSyncAsksRecentWritersFirst: the requester asks the peer most
// recently active in the channel first, then, as the fallback, the
// archive peer, then the admin.
func TestSyncAsksRecentWritersFirst(t *testing.T) {
	m := newSyncMesh(t, 4, 1) // b is an archive node
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	c := m.startWith(2, nil, tcpAddr(t, a))
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
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
		if _, err := c.Send(api.Send{To: "#ch", Body: fmt.Sprintf("c %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "a and b have 20", func() bool { return channelCount(a, p.ID) == 20 && channelCount(b, p.ID) == 20 })

	d := m.startWith(3, func(c *Config) { c.SyncInterval = -1 }, tcpAddr(t, a), tcpAddr(t, b), tcpAddr(t, c))
	waitFor(t, 10*time.Second, "d linked to all and caught up", func() bool {
		return len(d.PeerList()) == 3 && channelCount(d, p.ID) == 20
	})
	marked := time.Now()
	d.syncer.MarkDue(p.ID, false)
	var r syncer.Round
	waitFor(t, 10*time.Second, "a round with all three linked", func() bool {
		for _, x := range roundsOf(d, p.ID) {
			if x.Started.After(marked) {
				r = x
				return true
			}
		}
		return false
	})
	var order []proto.PubKey
	for _, pr := range r.Peers {
		order = append(order, pr.Peer)
	}
	want := []proto.PubKey{m.ids[2].Pub, m.ids[1].Pub, m.ids[0].Pub}
	if !slices.Equal(order, want) || r.Peers[0].Archive || !r.Peers[1].Archive {
		t.Fatalf("asked %v, want active c, then archive b, then admin a (%v)", order, want)
	}
}

// TestNewEpochAfterLostState: a sender that lost its store starts a new
// epoch numbering from 1; receivers take its messages as a new stream (no
// replay, no gap), and a reader that was away catches up both epochs.
func TestNewEpochAfterLostState(t *testing.T) {
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	c := m.startWith(2, nil, tcpAddr(t, a))
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	waitPolicy(t, c, "ch")
	waitFor(t, 10*time.Second, "b-c link", func() bool { return linked(b, m.ids[2].Pub) })
	ep1 := b.counter.Epoch()
	for i := 0; i < 5; i++ {
		if _, err := b.Send(api.Send{To: "#ch", Body: fmt.Sprintf("epoch one %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "a and c have 5", func() bool { return channelCount(a, p.ID) == 5 && channelCount(c, p.ID) == 5 })
	c.Close()
	b.Close()
	if err := os.Remove(filepath.Join(m.home(1), "history.db")); err != nil {
		t.Fatal(err)
	}
	b = m.startWith(1, nil, tcpAddr(t, a))
	ep2 := b.counter.Epoch()
	if ep2 == ep1 || !b.counter.Fresh() {
		t.Fatalf("after losing its store b kept epoch %s (fresh %v)", ep2, b.counter.Fresh())
	}
	waitFor(t, 10*time.Second, "b linked", func() bool { return linked(b, m.ids[0].Pub) })
	for i := 0; i < 5; i++ {
		sent, err := b.Send(api.Send{To: "#ch", Body: fmt.Sprintf("epoch two %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if sent.Seq != uint64(i+1) {
			t.Fatalf("new epoch message %d has seq %d", i, sent.Seq)
		}
	}
	waitFor(t, 10*time.Second, "a has 10", func() bool { return channelCount(a, p.ID) == 10 })
	// The restarted numbering was taken live, not dropped as a replay.
	stored, err := a.store.ChannelMessages(p.ID, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stored {
		if st.Epoch == ep2 && st.FromHistory {
			t.Fatalf("epoch two message seq %d reached a only through history", st.Seq)
		}
	}
	checkStreams := func(n *Node, who string) {
		t.Helper()
		streams, err := n.store.Gaps(proto.ToChannel(p.ID))
		if err != nil {
			t.Fatal(err)
		}
		got := map[uuid.UUID]history.Stream{}
		for _, st := range streams {
			if st.Sender.Equal(m.ids[1].Pub) {
				got[st.Epoch] = st
			}
		}
		for _, ep := range []uuid.UUID{ep1, ep2} {
			st, ok := got[ep]
			if !ok || st.First != 1 || st.Last != 5 || !st.Contiguous() || len(st.Missing) != 0 {
				t.Fatalf("%s: b's stream in epoch %s: %+v (found %v), want 1..5 without gaps", who, ep, st, ok)
			}
		}
		if len(got) != 2 {
			t.Fatalf("%s tracks %d streams of b, want 2", who, len(got))
		}
	}
	checkStreams(a, "a")
	// c was away for all of epoch two; b lost epoch one: both catch up.
	c = m.startWith(2, nil, tcpAddr(t, a))
	waitFor(t, 10*time.Second, "c and b have both epochs", func() bool {
		return channelCount(c, p.ID) == 10 && channelCount(b, p.ID) == 10
	})
	checkStreams(c, "c")
	checkStreams(b, "b")
}

// channelPair starts a and b (seeded with a), creates #ch on a, and waits
// until b holds its policy and the two are linked.
func channelPair(t *testing.T) (m *testMesh, a, b *Node, p *channel.Policy) {
	t.Helper()
	m = newSyncMesh(t, 2)
	a = m.startWith(0, nil)
	b = m.startWith(1, nil, tcpAddr(t, a))
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	waitFor(t, 10*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) && linked(b, m.ids[0].Pub) })
	return m, a, b, p
}

// syncIdle reports whether n's syncer has finished the rounds it started
// (every round counted in sync.rounds is in its log of finished rounds;
// at least one ran), has none due, no request awaiting an answer and no
// join left to backfill.
func syncIdle(n *Node) bool {
	finished := 0
	if v, ok := roundLogs.Load(n); ok {
		l := v.(*roundLog)
		l.mu.Lock()
		finished = len(l.rounds)
		l.mu.Unlock()
	}
	return finished > 0 && n.metrics.Get("sync.rounds") == uint64(finished) && n.syncer.Idle()
}

// Catch-up pages that repeat what a node holds (a join round asks without
// marks) are counted as sync.already_held, not as dropped duplicates.
func TestCatchUpOverlapIsNotADrop(t *testing.T) {
	_, a, b, p := channelPair(t)
	for i := 0; i < 5; i++ {
		if _, err := a.Send(api.Send{To: "#ch", Body: fmt.Sprintf("held %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "b holds 5", func() bool { return channelCount(b, p.ID) == 5 })
	// Let the rounds the policy and the link started finish.
	waitFor(t, 10*time.Second, "b's syncer idle", func() bool { return syncIdle(b) })
	dups, held := b.metrics.Get("drop.duplicate"), b.metrics.Get("sync.already_held")
	b.syncer.MarkDue(p.ID, true) // as after a join: asked without marks
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
	_, a, b, p := channelPair(t)
	// The first send reserves a block of sequence numbers, so the next
	// needs no store write before its commit.
	if _, err := a.Send(api.Send{To: "#ch", Body: "kept"}); err != nil {
		t.Fatal(err)
	}
	a.store.Close() // as a store that can no longer write
	_, err := a.Send(api.Send{To: "#ch", Body: "out, not kept"})
	if err == nil || !strings.Contains(err.Error(), "went to 1 peers") {
		t.Fatalf("send with a failing store: %v", err)
	}
	if a.Counters()["tx.store_failed"] != 1 {
		t.Fatalf("tx.store_failed = %d", a.Counters()["tx.store_failed"])
	}
	waitFor(t, 5*time.Second, "b has both", func() bool { return channelCount(b, p.ID) == 2 })
}

// A node that fetches its own channel messages back through catch-up
// (after losing its store) keeps them as history, not as mail.
func TestOwnMessagesFromCatchUpAreNotMail(t *testing.T) {
	m, a, b, p := channelPair(t)
	if _, err := b.SetSubscription("ch", "subscribed"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := b.Send(api.Send{To: "#ch", Body: fmt.Sprintf("mine %d", i)}); err != nil {
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
	in, err := b.Inbox(context.Background(), true, 0, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Items) != 0 {
		t.Fatalf("b's inbox holds %d of its own messages: %+v", len(in.Items), in.Items[0])
	}
}
