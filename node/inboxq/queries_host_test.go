package inboxq

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/claims"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost names members by a map, signs with the node's key, and records
// what the queries count, mark read and hand on.
type fakeHost struct {
	self    ed25519.PrivateKey
	roster  *roster.Roster
	members map[string]proto.PubKey

	mu        sync.Mutex
	counts    [NumCounters]int
	read      []proto.PubKey
	acted     int
	waiting   int // waits begun and not ended
	delivered []*proto.SignedEnvelope
	claims    [claims.NumCounters]uint64
}

func (h *fakeHost) Roster() *roster.Roster { return h.roster }
func (h *fakeHost) Party(k proto.PubKey) api.Party {
	return api.Party{Key: k, Fingerprint: k.Fingerprint()}
}
func (h *fakeHost) DestText(d proto.Destination) string { return d.String() }
func (h *fakeHost) ResolvePeer(q string) (roster.Member, error) {
	if k, ok := h.members[q]; ok {
		return roster.Member{Key: k, Name: q}, nil
	}
	return roster.Member{}, apierr.NotFound("", "no member %q", q)
}
func (h *fakeHost) ResolveChannel(q string) (*channel.Policy, error) {
	return nil, apierr.NotFound("", "no channel %q", q)
}
func (h *fakeHost) Channel(uuid.UUID) (*channel.Policy, bool)                     { return nil, false }
func (h *fakeHost) Attachments(*proto.SignedEnvelope, time.Time) []api.Attachment { return nil }
func (h *fakeHost) MarkFailed(*api.Item, *proto.SignedEnvelope)                   {}
func (h *fakeHost) CountClaim(c claims.Counter, d uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims[c] += d
}
func (h *fakeHost) claimCount(c claims.Counter) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claims[c]
}
func (h *fakeHost) Send(api.Send) (*api.Sent, error) { return &api.Sent{}, nil }
func (h *fakeHost) Read(from proto.PubKey, _ uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read = append(h.read, from)
}
func (h *fakeHost) Acted() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acted++
}
func (h *fakeHost) ClientWaiting() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.waiting--
	}
}
func (h *fakeHost) Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	e := &proto.Envelope{ID: proto.NewID(), From: proto.PubKeyOf(h.self), To: to, Kind: kind,
		TS: time.Now().UnixMilli(), TTL: uint32(ttl / time.Second), Seq: 1, Epoch: proto.NewEpoch()}
	fill(e)
	return proto.SignEnvelope(h.self, e)
}
func (h *fakeHost) Delivered(se *proto.SignedEnvelope, _ history.Priority, _ bool, _ time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delivered = append(h.delivered, se)
}
func (h *fakeHost) Count(c Counter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[c]++
}
func (h *fakeHost) count(c Counter) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[c]
}

// deliver puts a DM with id and body from key in the inbox of s.
func deliver(t *testing.T, s *history.Store, key ed25519.PrivateKey, to proto.PubKey, id uuid.UUID, body string) {
	t.Helper()
	e := &proto.Envelope{ID: id, From: proto.PubKeyOf(key), To: proto.ToPeer(to), Kind: proto.KindMessage,
		TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(), Message: &proto.Message{Body: body}}
	se, err := proto.SignEnvelope(key, e)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Deliver([]history.Delivery{{Env: se, Inbox: true, Priority: history.PriorityNormal, Wakes: true}}); err != nil || out[0] != history.Added {
		t.Fatalf("deliver: %v %v", out, err)
	}
}

// TestQueriesOverHost: the queries work over their Host and the store
// alone: a wait on an empty inbox ends at the next waking item, with the
// agent away while it waits; a claimed item renders with its claim,
// which its read releases; an id two senders share is refused
// without the sender (409, counted) and read with it (the read hook
// told); a filter of an unknown kind is refused and counted; a search
// finds the text; a subagent result is kept, handed on and rendered as
// one; a subscriber gets what is published, is told when it lagged and
// is gone once cancelled; and a wait ends when the node shuts down.
func TestQueriesOverHost(t *testing.T) {
	store, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, self, _ := ed25519.GenerateKey(nil)
	_, p1, _ := ed25519.GenerateKey(nil)
	_, p2, _ := ed25519.GenerateKey(nil)
	me := proto.PubKeyOf(self)
	r, err := roster.New("org", self, "me")
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{self: self, roster: r, members: map[string]proto.PubKey{"p1": proto.PubKeyOf(p1), "p2": proto.PubKeyOf(p2)}}
	done := make(chan struct{})
	q := New(h, store, nil, Config{Self: me, OfflineWindow: time.Hour, MaxDeliveryRecords: 100},
		slog.New(slog.NewTextHandler(io.Discard, nil)), done)

	// A wait on the empty inbox ends at the next waking item.
	type result struct {
		in  *api.Inbox
		err error
	}
	res := make(chan result, 1)
	wait := func(kind string) {
		go func() {
			in, err := q.InboxPage(context.Background(), api.InboxQuery{Wait: true, Timeout: 20 * time.Second, Filter: api.InboxFilter{Kind: kind}})
			res <- result{in, err}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, 10*time.Second, what, cond)
	}
	wait("")
	waitFor("the client's wait", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.waiting == 1 })
	shared := uuid.New()
	deliver(t, store, p1, me, shared, "hello from p1")
	q.Notify(true)
	select {
	case r := <-res:
		if r.err != nil || r.in.TimedOut || len(r.in.Items) != 1 || r.in.Items[0].Body != "hello from p1" {
			t.Fatalf("the wait: %+v %v", r.in, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waking item did not end the wait")
	}
	waitFor("the wait's end", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.waiting == 0 && h.acted == 1 })

	// An id two senders share is refused without the sender, read with it.
	deliver(t, store, p2, me, shared, "hello from p2")
	_, err = q.MarkRead(shared, "")
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || h.count(ReadAmbiguous) != 1 {
		t.Fatalf("read of a shared id: %v (counted %d)", err, h.count(ReadAmbiguous))
	}
	x, err := q.MarkRead(shared, "p2")
	if err != nil || !x.Read || x.Body != "hello from p2" || len(h.read) != 1 || !h.read[0].Equal(proto.PubKeyOf(p2)) {
		t.Fatalf("read with the sender: %+v %v (hook %v)", x, err, h.read)
	}

	// The claims on the inbox's items are the queries': a claimed item
	// renders with its claim, which its read releases (counted through
	// the host).
	claimed := uuid.New()
	deliver(t, store, p1, me, claimed, "work for a worker")
	if c, err := q.Claims.ClaimItem(claimed, "", api.Claim{Worker: "w1"}); err != nil || c.Claim == nil || c.Claim.Worker != "w1" {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if it, err := q.Item(claimed, ""); err != nil {
		t.Fatal(err)
	} else if x, err := q.Render(it); err != nil || x.Claim == nil || x.Claim.Worker != "w1" {
		t.Fatalf("claimed item renders %+v %v", x, err)
	}
	if x, err := q.MarkRead(claimed, ""); err != nil || x.Claim != nil || h.claimCount(claims.Taken) != 1 || h.claimCount(claims.Released) != 1 {
		t.Fatalf("read of a claimed item: %+v %v (taken %d, released %d)", x, err, h.claimCount(claims.Taken), h.claimCount(claims.Released))
	}

	// A filter of an unknown kind is refused and counted.
	if _, err := q.InboxPage(context.Background(), api.InboxQuery{Filter: api.InboxFilter{Kind: "memo"}}); !errors.Is(err, apierr.ErrBadRequest) || h.count(FilterRefused) != 1 {
		t.Fatalf("unknown kind: %v (counted %d)", err, h.count(FilterRefused))
	}

	// Search looks in read items too.
	found, err := q.Search("FROM P2", 0, api.InboxFilter{})
	if err != nil || len(found.Items) != 1 || found.Items[0].Body != "hello from p2" || h.count(SearchRuns) != 1 {
		t.Fatalf("search: %+v %v", found, err)
	}

	// A subagent result is kept, handed on and rendered as one.
	sub, err := q.PostSubagentResult(api.SubagentResult{SubagentID: "w-1", Summary: "done", Result: []byte(`{"ok": true}`)})
	if err != nil || sub.Kind != api.KindSubagentResult || sub.SubagentID != "w-1" || string(sub.Result) != `{"ok":true}` ||
		len(h.delivered) != 1 || h.count(SubagentPosted) != 1 || h.count(InboxItems) != 1 {
		t.Fatalf("subagent result: %+v %v (handed on %d)", sub, err, len(h.delivered))
	}
	if _, err := q.PostSubagentResult(api.SubagentResult{SubagentID: "w-1"}); !errors.Is(err, apierr.ErrBadRequest) || h.count(SubagentRefused) != 1 {
		t.Fatalf("a result without a summary: %v", err)
	}

	// A subscriber gets what is published, lags past its buffer, and is
	// gone once cancelled (twice is fine).
	items, lagged, cancel := q.SubscribeItems()
	if !q.Listening() {
		t.Fatal("no subscriber after SubscribeItems")
	}
	q.Publish(api.Rendered{Body: "one"})
	if it := (<-items).Item(); it.Body != "one" || lagged() {
		t.Fatalf("published item %+v", it)
	}
	for range eventSubBuffer + 1 {
		q.Publish(api.Rendered{})
	}
	if !lagged() || lagged() {
		t.Fatal("lag not reported once")
	}
	cancel()
	cancel()
	if q.Listening() {
		t.Fatal("subscriber left after cancel")
	}

	// A wait (for requests: none came) ends with the node.
	wait("request")
	close(done)
	select {
	case r := <-res:
		if r.err == nil {
			t.Fatalf("a wait at shutdown: %+v", r.in)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a wait outlived the node")
	}
}
