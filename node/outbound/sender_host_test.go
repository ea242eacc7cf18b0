package outbound

import (
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// fakeHost answers from a roster and records what the sender counts, sends and marks answered.
type fakeHost struct {
	r *roster.Roster

	mu       sync.Mutex
	counts   [NumCounters]uint64
	kinds    map[proto.Kind]int
	sent     []uuid.UUID
	queueing []bool
	answered []uuid.UUID
}

func (h *fakeHost) Roster() *roster.Roster { return h.r }
func (h *fakeHost) Acted()                 {}
func (h *fakeHost) MemberToSend() error    { return nil }
func (h *fakeHost) ResolvePeer(q string) (roster.Member, error) {
	ms, err := h.r.Lookup(q)
	if err != nil || len(ms) != 1 {
		return roster.Member{}, apierr.NotFound("", "no member %q", q)
	}
	return ms[0], nil
}
func (h *fakeHost) ResolveChannel(q string) (*channel.Policy, error) {
	return nil, apierr.NotFound("", "no channel %q", q)
}
func (h *fakeHost) MemberLabel(k proto.PubKey) string                { return k.Fingerprint() }
func (h *fakeHost) AttachFiles([]string) ([]proto.Attachment, error) { return nil, nil }
func (h *fakeHost) PreviousKey(proto.PubKey) (proto.PubKey, bool)    { return proto.PubKey{}, false }
func (h *fakeHost) Party(k proto.PubKey) api.Party {
	return api.Party{Key: k, Fingerprint: k.Fingerprint()}
}
func (h *fakeHost) DestText(d proto.Destination) string                     { return "@" + d.Peer.Fingerprint() }
func (h *fakeHost) AttachmentNote(uuid.UUID, history.DeliveryRecord) string { return "" }
func (h *fakeHost) CountFailed(history.DeliveryState)                       {}
func (h *fakeHost) FailedItems([]*proto.SignedEnvelope, time.Time, bool)    {}
func (h *fakeHost) IsLocalItem(*proto.SignedEnvelope) bool                  { return false }
func (h *fakeHost) Answered(_ proto.PubKey, id uuid.UUID) {
	h.lock(func() { h.answered = append(h.answered, id) })
}
func (h *fakeHost) Sent(se *proto.SignedEnvelope) { h.lock(func() { h.sent = append(h.sent, se.ID) }) }
func (h *fakeHost) Count(c Counter, d uint64)     { h.lock(func() { h.counts[c] += d }) }
func (h *fakeHost) CountSent(k proto.Kind)        { h.lock(func() { h.kinds[k]++ }) }
func (h *fakeHost) count(c Counter) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[c]
}
func (h *fakeHost) lock(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// noLinks is a peer table with no peer linked.
type noLinks struct{ sync.Mutex }

func (*noLinks) LinkedLocked(proto.PubKey) *peers.Link     { return nil }
func (*noLinks) Linked(proto.PubKey) *peers.Link           { return nil }
func (*noLinks) Send(*peers.Link, proto.FrameType, []byte) {}
func (*noLinks) AckVia(pl *peers.Link) *peers.Link         { return pl }

// wantStatus fails t unless err is an apierr refusal with status.
func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Status != status {
		t.Fatalf("%s: %v, want a refusal with status %d", what, err, status)
	}
}

// TestSenderOverHost: the sender works over its Host, a store and a peer
// table alone. A DM to a peer not linked is signed, numbered, kept and
// reported queued, with a delivery record; a reply past the reply depth,
// a second final answer and a follow-up past the hop limit are refused
// and counted; an ack that lists the DM twice clears it once, and an ack
// that does not parse is counted.
func TestSenderOverHost(t *testing.T) {
	_, selfKey, _ := ed25519.GenerateKey(nil)
	peerPub, _, _ := ed25519.GenerateKey(nil)
	self, peer := proto.PubKeyOf(selfKey), proto.PubKey(peerPub)
	r, err := roster.New("org", selfKey, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Add(roster.Member{Key: peer, Role: roster.RoleMember, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	hc := history.DefaultConfig()
	hc.Self = self
	st, err := history.Open(filepath.Join(t.TempDir(), "history.db"), hc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	counter, err := history.OpenSendCounter(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { counter.Close() })
	rid := uuid.New()
	h := &fakeHost{r: r, kinds: map[proto.Kind]int{}}
	s := New(h, Config{Self: self, Key: selfKey, Counter: counter, Store: st, Peers: &noLinks{},
		Queueing: func(linked bool) { h.lock(func() { h.queueing = append(h.queueing, linked) }) },
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)), EnvelopeTTL: time.Hour, OfflineWindow: time.Hour,
		DirectRetention: time.Hour, MaxReplyDepth: 1})
	s.NoteRequest(&proto.SignedEnvelope{Envelope: proto.Envelope{From: peer, Request: &proto.Request{RequestID: rid, Hop: 3}}})

	dm, err := s.Send(api.Send{To: "b", Body: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if !dm.Queued || len(dm.SentTo) != 0 || dm.Seq != 1 || h.count(Kept) != 1 || !slices.Equal(h.queueing, []bool{false}) {
		t.Fatalf("DM to an unlinked peer: %+v, kept %d, queueing %v", dm, h.count(Kept), h.queueing)
	}
	kept, err := st.Pending(peer)
	if err != nil || len(kept) != 1 || kept[0].ID.String() != dm.ID || !kept[0].From.Equal(self) || kept[0].Verify() != nil {
		t.Fatalf("kept for the peer: %v, %v", kept, err)
	}
	id := uuid.MustParse(dm.ID)
	d, err := s.DeliveryStatus(id)
	if err != nil || len(d.Recipients) != 1 || d.Recipients[0].State != history.DeliveryQueued.String() {
		t.Fatalf("delivery status: %+v, %v", d, err)
	}
	if _, err := s.Sent(api.SentQuery{Limit: -1}); !errors.Is(err, apierr.ErrBadRequest) {
		t.Fatalf("a negative limit: %v", err)
	}

	// Reply depth 1 is allowed; a reply to that reply is depth 2.
	reply, err := s.Send(api.Send{To: "b", Body: "re", InReplyTo: dm.ID})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(api.Send{To: "b", Body: "re re", InReplyTo: reply.ID})
	wantStatus(t, "a reply past reply_depth_max", err, http.StatusTooManyRequests)
	if h.count(RefusedReplyDepth) != 1 {
		t.Fatalf("reply depth refusals counted %d", h.count(RefusedReplyDepth))
	}

	// One final answer per request.
	if _, err := s.Respond(api.Respond{RequestID: rid.String(), Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Respond(api.Respond{RequestID: rid.String(), Status: "failed"})
	wantStatus(t, "a second final answer", err, http.StatusConflict)
	if h.count(RespondTwice) != 1 || !slices.Equal(h.answered, []uuid.UUID{rid}) {
		t.Fatalf("second answer counted %d, answered %v", h.count(RespondTwice), h.answered)
	}

	// A follow-up of a hop-3 request would be hop 4.
	_, err = s.Request(api.Request{To: "b", Intent: "more", ReplyTo: rid.String()})
	wantStatus(t, "a follow-up past the hop limit", err, http.StatusForbidden)
	if h.count(RefusedHopLimit) != 1 {
		t.Fatalf("hop limit refusals counted %d", h.count(RefusedHopLimit))
	}

	// An ack that lists the DM twice clears it once.
	ack, err := proto.Marshal(&proto.Ack{IDs: []uuid.UUID{id, id}})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleAck(&peers.Link{Key: peer}, ack)
	if h.count(Acked) != 1 {
		t.Fatalf("acked counted %d, want 1", h.count(Acked))
	}
	kept, err = st.Pending(peer)
	if err != nil || slices.ContainsFunc(kept, func(se *proto.SignedEnvelope) bool { return se.ID == id }) {
		t.Fatalf("the acked DM is still kept: %v", err)
	}
	s.HandleAck(&peers.Link{Key: peer}, []byte{0xff})
	if h.count(AckMalformed) != 1 {
		t.Fatalf("malformed acks counted %d", h.count(AckMalformed))
	}
	if len(h.sent) != 3 || h.kinds[proto.KindMessage] != 2 || h.kinds[proto.KindResponse] != 1 {
		t.Fatalf("sent %d, by kind %v", len(h.sent), h.kinds)
	}
}

// TestAckable: what is acknowledged once stored is a DM to this node or a
// channel Message that came live on a link from its own sender; not one
// from a history page, relayed by another member, or to another peer.
func TestAckable(t *testing.T) {
	var self, p, q proto.PubKey
	self[0], p[0], q[0] = 1, 2, 3
	s := New(nil, Config{Self: self})
	env := func(from proto.PubKey, to proto.Destination, kind proto.Kind) *proto.SignedEnvelope {
		return &proto.SignedEnvelope{Envelope: proto.Envelope{From: from, To: to, Kind: kind}}
	}
	onP := &peers.Link{Key: p}
	for _, c := range []struct {
		what    string
		se      *proto.SignedEnvelope
		via     *peers.Link
		history bool
		want    bool
	}{
		{"a DM from the link's peer", env(p, proto.ToPeer(self), proto.KindMessage), onP, false, true},
		{"a channel Message from the link's peer", env(p, proto.ToChannel(proto.NewID()), proto.KindMessage), onP, false, true},
		{"a DM in a history page", env(p, proto.ToPeer(self), proto.KindMessage), onP, true, false},
		{"a DM relayed by another member", env(q, proto.ToPeer(self), proto.KindMessage), onP, false, false},
		{"a DM to another peer", env(p, proto.ToPeer(q), proto.KindMessage), onP, false, false},
		{"a DM not on a link", env(p, proto.ToPeer(self), proto.KindMessage), nil, false, false},
		{"a channel Request", env(p, proto.ToChannel(proto.NewID()), proto.KindRequest), onP, false, false},
	} {
		if got := s.Ackable(c.se, c.via, c.history); got != c.want {
			t.Errorf("%s: ackable %v, want %v", c.what, got, c.want)
		}
	}
}
