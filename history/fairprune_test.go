package history

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// TestPruneByCountIsFair: a sender flooding a channel with messages
// stamped ahead of the clock loses its own oldest when the count is
// passed; the other senders' messages, older by ts, all stay.
func TestPruneByCountIsFair(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	var gone []PrunedItem
	s, _ := openTest(t, Config{Now: clk.now, PruneChunk: 7, InboxPruned: func(p []PrunedItem) { gone = append(gone, p...) }})
	alice, bob, mallory := newSender(t, "alice"), newSender(t, "bob"), newSender(t, "mallory")
	ch := uuid.New()
	var quiet []*proto.SignedEnvelope
	for i := range 10 {
		quiet = append(quiet, alice.msg(t, ch, t0.Add(time.Duration(i-20)*time.Minute).UnixMilli(), "a"),
			bob.msg(t, ch, t0.Add(time.Duration(i-20)*time.Minute).UnixMilli(), "b"))
	}
	mustPut(t, s, quiet...)
	var flood []*proto.SignedEnvelope
	for i := range 102 {
		flood = append(flood, mallory.msg(t, ch, t0.Add(20*time.Second+time.Duration(i)*time.Millisecond).UnixMilli(), "f"))
	}
	mustPut(t, s, flood...)
	// The flood was read (so evictable); one of alice's is an inbox item,
	// read too, so that its removal is reported.
	if err := s.SetInbox(alice.pub, quiet[0].ID, PriorityNormal, false); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRead(alice.pub, quiet[0].ID); err != nil {
		t.Fatal(err)
	}
	// 122 stored, keep 100: mallory's 22 oldest go, nobody else's.
	if n, err := s.Prune(ch, 0, 100, t0); err != nil || n != 22 {
		t.Fatalf("prune by count: removed %d, %v; want 22", n, err)
	}
	for _, e := range quiet {
		if _, err := s.Get(e.From, e.ID); err != nil {
			t.Fatalf("another sender's message evicted by the flood: %v", err)
		}
	}
	for i, e := range flood {
		_, err := s.Get(e.From, e.ID)
		if gotGone := errors.Is(err, ErrNotFound); gotGone != (i < 22) {
			t.Fatalf("flood message %d: gone=%v, want %v (oldest first)", i, gotGone, i < 22)
		}
	}
	// Keep 30: mallory is cut to 10, as many as the others hold.
	if n, err := s.Prune(ch, 0, 30, t0); err != nil || n != 70 {
		t.Fatalf("prune to 30: removed %d, %v; want 70", n, err)
	}
	// Keep 15: everyone goes down to 5; alice's oldest (the read inbox
	// item) goes and is reported.
	if n, err := s.Prune(ch, 0, 15, t0); err != nil || n != 15 {
		t.Fatalf("prune to 15: removed %d, %v; want 15", n, err)
	}
	if len(gone) != 1 || gone[0].ID != quiet[0].ID || !gone[0].From.Equal(alice.pub) {
		t.Errorf("reported inbox removals %+v, want alice's first message", gone)
	}
	checkDB(t, s)
}

// TestPruneByCountKeepsUnread: unread inbox items are never evicted by
// count, however many there are; they still go by age.
func TestPruneByCountKeepsUnread(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now, PruneChunk: 4})
	alice, mallory := newSender(t, "alice"), newSender(t, "mallory")
	ch := uuid.New()
	var unread, flood []*proto.SignedEnvelope
	for i := range 5 {
		unread = append(unread, alice.msg(t, ch, t0.Add(time.Duration(i-60)*time.Minute).UnixMilli(), "u"))
	}
	for i := range 20 {
		flood = append(flood, mallory.msg(t, ch, t0.Add(time.Duration(i)*time.Second).UnixMilli(), "f"))
	}
	mustPut(t, s, unread...)
	mustPut(t, s, flood...)
	for _, e := range append(append([]*proto.SignedEnvelope{}, unread...), flood...) {
		if err := s.SetInbox(e.From, e.ID, PriorityNormal, true); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is unread: nothing is evictable by count.
	if n, err := s.Prune(ch, 0, 3, t0); err != nil || n != 0 {
		t.Fatalf("prune of unread items by count: removed %d, %v; want 0", n, err)
	}
	for _, e := range flood[:10] {
		if err := s.MarkRead(e.From, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	// The 10 read ones go; the unread stay above the limit.
	if n, err := s.Prune(ch, 0, 3, t0); err != nil || n != 10 {
		t.Fatalf("prune by count: removed %d, %v; want the 10 read", n, err)
	}
	if items, _ := s.Inbox(InboxFilter{UnreadOnly: true}); len(items) != 15 {
		t.Errorf("%d unread items left, want 15", len(items))
	}
	// By age an unread item goes like any other.
	if n, err := s.Prune(ch, 30*time.Minute, 0, t0); err != nil || n != 5 {
		t.Fatalf("prune by age: removed %d, %v; want alice's 5", n, err)
	}
	checkDB(t, s)
}

// TestPruneAgesFromReceipt: a ts ahead of the receiver's clock when the
// envelope arrived buys it no longer life: it ages from when it was
// received.
func TestPruneAgesFromReceipt(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	alice := newSender(t, "alice")
	ch := uuid.New()
	ahead := alice.msg(t, ch, t0.Add(25*time.Second).UnixMilli(), "ahead")
	onTime := alice.msg(t, ch, t0.UnixMilli(), "on time")
	mustPut(t, s, ahead, onTime)
	// An hour's retention, checked an hour and 10 s after receipt: both
	// were received an hour and 10 s ago, so both go, although ahead's
	// ts is only 45 s past the cutoff.
	if n, err := s.Prune(ch, time.Hour, 0, t0.Add(time.Hour+10*time.Second)); err != nil || n != 2 {
		t.Fatalf("removed %d, %v; want both", n, err)
	}
	// A message received late with an old ts ages from its ts.
	clk.t = t0.Add(2 * time.Hour)
	late := alice.msg(t, ch, t0.Add(time.Hour).UnixMilli(), "late")
	mustPut(t, s, late)
	if n, err := s.Prune(ch, time.Hour, 0, t0.Add(2*time.Hour+time.Second)); err != nil || n != 1 {
		t.Fatalf("late message: removed %d, %v; want 1", n, err)
	}
	checkDB(t, s)
}

func TestWaterFill(t *testing.T) {
	t.Parallel()
	k := func(b byte) proto.PubKey { var p proto.PubKey; p[0] = b; return p }
	got := waterFill(map[proto.PubKey]int{k(1): 100, k(2): 10, k(3): 40}, 95)
	// Cut to the level 27 frees 73+13 = 86 < 95; to 23: 77+17 = 94; to 22:
	// 78+18 = 96, one given back.
	if got[k(1)]+got[k(2)]+got[k(3)] != 95 || got[k(2)] != 0 || got[k(1)] < 77 || got[k(3)] < 17 {
		t.Errorf("waterFill = %v", got)
	}
	if got := waterFill(map[proto.PubKey]int{k(1): 3, k(2): 2}, 10); got[k(1)] != 3 || got[k(2)] != 2 {
		t.Errorf("waterFill past everything = %v, want all", got)
	}
}

// BenchmarkPruneByCountFlood measures one count retention pass over a
// flooded channel: 10,200 messages, 10,150 of them one sender's and 50
// of another's (no inbox items: a node that did not subscribe), cut to
// 10,000. Each iteration
// puts the 200 back that the pass removed.
func BenchmarkPruneByCountFlood(b *testing.B) {
	s, _ := openTest(b, Config{})
	mal, alice := newSender(b, "mal"), newSender(b, "alice")
	ch := uuid.New()
	ts := t0.UnixMilli()
	var quiet []*proto.SignedEnvelope
	for i := range 50 {
		quiet = append(quiet, alice.msg(b, ch, ts+int64(i), "a"))
	}
	mustPut(b, s, quiet...)
	next := 0
	flood := func(n int) {
		var envs []*proto.SignedEnvelope
		for range n {
			envs = append(envs, mal.msg(b, ch, ts+1000+int64(next), "f"))
			next++
		}
		for i := 0; i < len(envs); i += 1000 {
			mustPut(b, s, envs[i:min(i+1000, len(envs))]...)
		}
	}
	flood(10_150)
	b.ResetTimer()
	for range b.N {
		n, err := s.Prune(ch, 0, 10_000, t0)
		if err != nil || n != 200 {
			b.Fatalf("removed %d, %v; want 200", n, err)
		}
		b.StopTimer()
		flood(200)
		b.StartTimer()
	}
	b.StopTimer()
	for _, e := range quiet {
		if _, err := s.Get(e.From, e.ID); err != nil {
			b.Fatal("the other sender lost a message")
		}
	}
}
