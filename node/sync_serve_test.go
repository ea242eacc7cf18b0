package node

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// Serving HistoryRequests (PROTOCOL.md §17.6) and admitting their
// answers (§17.4).

// TestServeHistoryPagingAtLimits checks the answers to HistoryRequests at
// and around max_messages and max_bytes, and that paging with `more`
// returns every message once.
func TestServeHistoryPagingAtLimits(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, nil)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
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
	t.Parallel()
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	quiet, err := a.chans.CreateChannel(api.CreateChannel{Name: "quiet", NoHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := a.chans.CreateChannel(api.CreateChannel{Name: "secret", Readers: []string{"a"}})
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
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) { c.SyncPageMessages = 4; c.SyncInterval = -1; c.SyncTimeout = 2 * time.Second })
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.chans.CreateChannel(api.CreateChannel{Name: "other"})
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
	a.rx.Sync.MarkDue(p.ID, false)
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
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) {
		c.HistoryServeConcurrency = 1
		c.HistoryServeRate = 1 // the burst below comes well within a second of the first answer
		c.HistoryServeBurst = 1
	})
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	fillChannel(t, a, p.ID, 20, 100)
	rp := dialRaw(t, m, 1, a)
	req := proto.HistoryRequest{ChannelID: p.ID, SinceTS: time.Now().Add(-time.Hour).UnixMilli(), MaxMessages: 100, MaxBytes: proto.MaxHistoryBytes}
	// One answered: it takes the only token.
	rp.ask(req)
	waitFor(t, 5*time.Second, "the slot released", func() bool { return a.rx.Sync.Serving(m.ids[1].Pub) == 0 })
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
