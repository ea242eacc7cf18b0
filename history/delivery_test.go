package history

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// TestDeliveryRecords follows sent envelopes through every state: queued,
// delivered by an ack, expired (by Pending and by ExpireQueues) and
// refused, and checks that a failure reaches the hook and our own inbox.
func TestDeliveryRecords(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now})
	var mu sync.Mutex
	var failed []DeliveryRecord
	s.OnDeliveryFailed(func(rs []DeliveryRecord) { mu.Lock(); failed = append(failed, rs...); mu.Unlock() })
	us, bob, carol := newSender(t, "us"), newSender(t, "bob"), newSender(t, "carol")
	var envs []*proto.SignedEnvelope
	for i := range 4 {
		envs = append(envs, us.env(t, proto.ToPeer(bob.pub), t0.UnixMilli()+int64(i), "for bob"))
	}
	for _, se := range envs {
		if err := s.Enqueue(bob.pub, se); err != nil {
			t.Fatal(err)
		}
	}
	forCarol := us.env(t, proto.ToPeer(carol.pub), t0.UnixMilli(), "for carol")
	if err := s.Enqueue(carol.pub, forCarol); err != nil {
		t.Fatal(err)
	}
	state := func(id uuid.UUID) DeliveryRecord {
		t.Helper()
		rs, err := s.DeliveriesOf(id)
		if err != nil || len(rs) != 1 {
			t.Fatalf("deliveries of %s: %v, %v", id, rs, err)
		}
		return rs[0]
	}
	if r := state(envs[0].ID); r.State != DeliveryQueued || !r.Peer.Equal(bob.pub) || r.Kind != proto.KindMessage {
		t.Fatalf("after enqueue: %+v", r)
	}
	clk.t = t0.Add(time.Second)
	if err := s.Ack(bob.pub, envs[0].ID); err != nil {
		t.Fatal(err)
	}
	if r := state(envs[0].ID); r.State != DeliveryDelivered || !r.At.Equal(clk.t) {
		t.Fatalf("after ack: %+v, want delivered at %v", r, clk.t)
	}
	// An ack from carol does not touch bob's entry.
	if err := s.Ack(carol.pub, envs[1].ID); err != nil {
		t.Fatal(err)
	}
	if r := state(envs[1].ID); r.State != DeliveryQueued {
		t.Fatalf("another peer's ack changed the record: %+v", r)
	}
	// Refused: everything queued for carol.
	rs, err := s.RefuseQueued(carol.pub, "carol left the roster")
	if err != nil || len(rs) != 1 || rs[0].State != DeliveryRefused || rs[0].Reason != "carol left the roster" {
		t.Fatalf("refuse: %+v, %v", rs, err)
	}
	// Expiry through Pending, then through ExpireQueues.
	clk.t = t0.Add(proto.DefaultTTL*time.Second + 3*time.Millisecond)
	pending, err := s.Pending(bob.pub)
	if err != nil || len(pending) != 1 || pending[0].ID != envs[3].ID {
		t.Fatalf("pending after expiry: %d, %v", len(pending), err)
	}
	if _, err := s.ExpireQueues(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, se := range envs[1:] {
		if r := state(se.ID); r.State != DeliveryExpired {
			t.Errorf("%s: %v, want expired", se.ID, r.State)
		}
	}
	mu.Lock()
	if len(failed) != 4 {
		t.Errorf("hook told of %d failures, want 4 (1 refused, 3 expired)", len(failed))
	}
	mu.Unlock()
	// Each failure is an unread waking item of ours in the inbox.
	items, err := s.Inbox(InboxFilter{UnreadOnly: true})
	if err != nil || len(items) != 4 {
		t.Fatalf("inbox: %d items, %v; want 4", len(items), err)
	}
	for _, it := range items {
		if !it.From.Equal(us.pub) || !it.Wakes || it.Priority != PriorityHigh {
			t.Errorf("failure item %+v: want ours, waking, high", it)
		}
	}
	// Newest first; pending keeps the queued ones only (none left).
	all, err := s.Deliveries(DeliveryFilter{})
	if err != nil || len(all) != 5 {
		t.Fatalf("deliveries: %d, %v", len(all), err)
	}
	if p, _ := s.Deliveries(DeliveryFilter{Pending: true}); len(p) != 0 {
		t.Errorf("pending deliveries: %d, want 0", len(p))
	}
	s.Close()
	s = openAt(t, path, Config{Now: clk.now})
	if r, _ := s.DeliveriesOf(envs[0].ID); len(r) != 1 || r[0].State != DeliveryDelivered {
		t.Fatalf("after reopen: %+v", r)
	}
	// Pruning keeps none sent before the cut that are final, and bounds
	// the rest.
	n, err := s.PruneDeliveries(t0.Add(time.Hour), 1000)
	if err != nil || n != 5 {
		t.Fatalf("prune: %d, %v; want 5", n, err)
	}
	checkDB(t, s)
}

// TestDeliveryChannelAcks counts each reader's ack of a channel Message
// once, and ignores acks for ids that are not ours.
func TestDeliveryChannelAcks(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	us, bob, carol := newSender(t, "us"), newSender(t, "bob"), newSender(t, "carol")
	ch := uuid.New()
	se := us.msg(t, ch, t0.UnixMilli(), "hello")
	if err := s.PutSent(se, 2); err != nil {
		t.Fatal(err)
	}
	for _, k := range []proto.PubKey{bob.pub, bob.pub, carol.pub} {
		if err := s.Ack(k, se.ID, uuid.New()); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.DeliveriesOf(se.ID)
	if err != nil || len(rs) != 1 {
		t.Fatalf("deliveries: %v, %v", rs, err)
	}
	if r := rs[0]; !r.IsChannel || r.Channel != ch || r.Readers != 2 || r.Acked != 2 || r.State != DeliverySent {
		t.Fatalf("channel record %+v: want 2 readers, 2 acked", r)
	}
	if n, err := s.PruneDeliveries(t0.Add(time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	checkDB(t, s)
}

// TestCountReaderAcksBatched: one batch of readers' acks, taken per
// Message, counts each reader of each Message once (a reader listing an
// id twice, or acking it again in a later batch, counts once), and
// ignores ids that name no channel Message of ours.
func TestCountReaderAcksBatched(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	us, bob, carol, dave := newSender(t, "us"), newSender(t, "bob"), newSender(t, "carol"), newSender(t, "dave")
	ch := uuid.New()
	m1 := us.msg(t, ch, t0.UnixMilli(), "one")
	m2 := us.msg(t, ch, t0.UnixMilli()+1, "two")
	for _, se := range []*proto.SignedEnvelope{m1, m2} {
		if err := s.PutSent(se, 3); err != nil {
			t.Fatal(err)
		}
	}
	err := s.CountReaderAcks(map[proto.PubKey][]uuid.UUID{
		bob.pub:   {m1.ID, m2.ID, m1.ID, uuid.New()},
		carol.pub: {m2.ID},
		dave.pub:  {uuid.New()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CountReaderAcks(map[proto.PubKey][]uuid.UUID{bob.pub: {m2.ID}, dave.pub: {m2.ID}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    uuid.UUID
		acked int
	}{{m1.ID, 1}, {m2.ID, 3}} {
		rs, err := s.DeliveriesOf(c.id)
		if err != nil || len(rs) != 1 {
			t.Fatalf("deliveries: %v, %v", rs, err)
		}
		if rs[0].Acked != c.acked || rs[0].Readers != 3 {
			t.Fatalf("record %+v: want %d acked of 3", rs[0], c.acked)
		}
	}
	checkDB(t, s)
}

// BenchmarkEnqueueAck measures a DM's durable life in the store: queued
// (with its delivery record) and acked (the record set delivered).
func BenchmarkEnqueueAck(b *testing.B) {
	s, _ := openTest(b, Config{})
	us, bob := newSender(b, "us"), newSender(b, "bob")
	envs := make([]*proto.SignedEnvelope, b.N)
	for i := range envs {
		envs[i] = us.env(b, proto.ToPeer(bob.pub), time.Now().UnixMilli(), body(1024))
	}
	b.ResetTimer()
	for _, se := range envs {
		if err := s.Enqueue(bob.pub, se); err != nil {
			b.Fatal(err)
		}
		if err := s.Ack(bob.pub, se.ID); err != nil {
			b.Fatal(err)
		}
	}
}
