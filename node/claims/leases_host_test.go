package claims

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

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// fakeHost finds and renders items straight from the store, and records
// what the leases count and mark read.
type fakeHost struct {
	self  proto.PubKey
	store *history.Store
	woken chan struct{}

	mu     sync.Mutex
	counts [NumCounters]uint64
	read   []uuid.UUID
}

func (h *fakeHost) Self() proto.PubKey { return h.self }
func (h *fakeHost) Item(id uuid.UUID, _ string) (history.InboxItem, error) {
	items, err := h.store.InboxByID(id)
	if err != nil || len(items) == 0 {
		return history.InboxItem{}, apierr.NotFound("", "no inbox item %s", id)
	}
	return items[0], nil
}
func (h *fakeHost) Match(api.InboxFilter) (func(*history.Meta) bool, time.Time, error) {
	return nil, time.Time{}, nil
}
func (h *fakeHost) Render(it history.InboxItem) (api.Item, error) {
	return api.Item{ID: it.ID.String()}, nil
}
func (h *fakeHost) Woken() <-chan struct{} { return h.woken }
func (h *fakeHost) Read(_ proto.PubKey, id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.read = append(h.read, id)
}
func (h *fakeHost) Count(c Counter, d uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[c] += d
}

// deliver puts a DM (or, with requestID set, a Request) from key in the
// inbox of s and returns its id.
func deliver(t *testing.T, s *history.Store, key ed25519.PrivateKey, to proto.PubKey, requestID uuid.UUID) uuid.UUID {
	t.Helper()
	e := &proto.Envelope{ID: proto.NewID(), From: proto.PubKeyOf(key), To: proto.ToPeer(to), Kind: proto.KindMessage,
		TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(), Message: &proto.Message{Body: "work"}}
	if requestID != uuid.Nil {
		e.Kind, e.Message, e.Request = proto.KindRequest, nil, &proto.Request{RequestID: requestID, Intent: "run-tests"}
	}
	se, err := proto.SignEnvelope(key, e)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Deliver([]history.Delivery{{Env: se, Inbox: true, Priority: history.PriorityNormal, Wakes: true}}); err != nil || out[0] != history.Added {
		t.Fatalf("deliver: %v %v", out, err)
	}
	return se.ID
}

// TestLeasesOverHost: the leases work over their Host and the store
// alone: a claimed item is refused to another worker (409, counted as a
// conflict) and skipped by its ClaimNext; a waiting ClaimNext takes the
// item a release frees; answering a claimed Request releases it and
// marks it read; and a wait ends when the node shuts down.
func TestLeasesOverHost(t *testing.T) {
	store, err := history.Open(filepath.Join(t.TempDir(), "history.db"), history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, self, _ := ed25519.GenerateKey(nil)
	_, peer, _ := ed25519.GenerateKey(nil)
	me := proto.PubKeyOf(self)
	reqID := uuid.New()
	req := deliver(t, store, peer, me, reqID)
	dm := deliver(t, store, peer, me, uuid.Nil)

	h := &fakeHost{self: me, store: store, woken: make(chan struct{})}
	done := make(chan struct{})
	b := New(h, store, Config{PageItems: 10, PageBytes: 1 << 20}, slog.New(slog.NewTextHandler(io.Discard, nil)), done)

	if _, err := b.ClaimItem(req, "", api.Claim{Worker: "w1", Lease: "1m"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.ClaimItem(req, "", api.Claim{Worker: "w2"})
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || h.counts[Conflict] != 1 {
		t.Fatalf("a second worker's claim: %v (conflicts %d)", err, h.counts[Conflict])
	}
	got, err := b.ClaimNext(context.Background(), api.ClaimNext{Count: 5, Worker: "w2"})
	if err != nil || len(got.Items) != 1 || got.Items[0].ID != dm.String() {
		t.Fatalf("w2's ClaimNext: %+v %v", got, err)
	}

	// Everything is claimed: a waiting ClaimNext takes what w2 releases.
	type result struct {
		in  *api.Inbox
		err error
	}
	res := make(chan result, 1)
	go func() {
		in, err := b.ClaimNext(context.Background(), api.ClaimNext{Count: 1, Worker: "w3", Wait: true, Timeout: "20s"})
		res <- result{in, err}
	}()
	if _, err := b.ClaimItem(dm, "", api.Claim{Worker: "w2", Release: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || len(r.in.Items) != 1 || r.in.Items[0].ID != dm.String() {
			t.Fatalf("w3 after the release: %+v %v", r.in, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a release did not wake the waiting ClaimNext")
	}

	// Answering the Request releases w1's claim and marks it read.
	b.Answered(proto.PubKeyOf(peer), reqID)
	if it, err := store.InboxEntry(proto.PubKeyOf(peer), req); err != nil || !it.Read || len(h.read) != 1 || h.read[0] != req {
		t.Fatalf("answered request: read %v, hook %v, %v", it.Read, h.read, err)
	}
	if b.Of(Key{proto.PubKeyOf(peer), req}, time.Now()) != nil {
		t.Fatal("the answered request is still claimed")
	}

	// A wait ends with the node.
	go func() {
		in, err := b.ClaimNext(context.Background(), api.ClaimNext{Count: 1, Worker: "w4", Wait: true, Timeout: "20s"})
		res <- result{in, err}
	}()
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
