package history

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

func TestPruneByAgeAndCount(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now, PruneChunk: 7})
	alice := newSender(t, "alice")
	ch, other := uuid.New(), uuid.New()
	// 50 envelopes, one a minute, the newest at t0.
	var envs []*proto.SignedEnvelope
	for i := range 50 {
		envs = append(envs, alice.msg(t, ch, t0.Add(time.Duration(i-49)*time.Minute).UnixMilli(), "m"))
	}
	mustPut(t, s, envs...)
	mustPut(t, s, alice.msg(t, other, t0.Add(-time.Hour).UnixMilli(), "other channel"))
	old := envs[0]
	if err := s.SetInbox(old.From, old.ID, PriorityNormal, true); err != nil {
		t.Fatal(err)
	}

	// By age: 30 minutes keeps the 30 envelopes from t0-29m on (ts
	// exactly at the cutoff is kept).
	n, err := s.Prune(ch, 30*time.Minute, 0, t0.Add(time.Minute))
	if err != nil || n != 20 {
		t.Fatalf("prune by age: removed %d, %v; want 20", n, err)
	}
	if _, err := s.Get(envs[19].From, envs[19].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("envelope older than the cutoff still stored")
	}
	if _, err := s.Get(envs[20].From, envs[20].ID); err != nil {
		t.Errorf("envelope inside the window pruned: %v", err)
	}
	// By count: keep 25.
	if n, err := s.Prune(ch, 0, 25, t0); err != nil || n != 5 {
		t.Fatalf("prune by count: removed %d, %v; want 5", n, err)
	}
	// Both: age would keep 20 (t0-19m on), count 22; the smaller wins.
	if n, err := s.Prune(ch, 20*time.Minute, 22, t0.Add(time.Minute)); err != nil || n != 5 {
		t.Fatalf("prune by both: removed %d, %v; want 5", n, err)
	}
	if n, err := s.Prune(ch, 20*time.Minute, 22, t0.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("second prune: removed %d, %v; want 0", n, err)
	}
	st := mustStats(t, s)
	if st.Channels[ch] != 20 || st.Channels[other] != 1 || st.Pruned != 30 {
		t.Errorf("after pruning: channel %d, other %d, pruned %d; want 20, 1, 30", st.Channels[ch], st.Channels[other], st.Pruned)
	}
	msgs, _ := s.ChannelMessages(ch, time.Time{}, 0)
	if len(msgs) != 20 || msgs[0].ID != envs[30].ID {
		t.Errorf("remaining messages start at %v, want the newest 20", msgs[0].ID)
	}
	// Pruned envelopes lose their inbox state but stay deduplicated.
	if err := s.MarkRead(old.From, old.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("mark read of a pruned envelope: %v, want ErrNotFound", err)
	}
	if items, _ := s.Inbox(InboxFilter{}); len(items) != 0 {
		t.Errorf("inbox still lists %d pruned items", len(items))
	}
	if added, err := s.Put(old, true); err != nil || added {
		t.Errorf("pruned envelope offered again: added=%v err=%v, want a duplicate", added, err)
	}
	checkDB(t, s)
}

func TestPruneStreamsSeenAndDirect(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now, SeenMaxAge: time.Hour, PruneChunk: 3})
	alice := newSender(t, "alice")
	us := newSender(t, "us")
	ch := uuid.New()
	oldMsg := alice.msg(t, ch, t0.UnixMilli(), "old")
	oldDM := alice.env(t, proto.ToPeer(us.pub), t0.UnixMilli(), "old dm")
	mustPut(t, s, oldMsg, oldDM)
	if err := s.SetInbox(oldDM.From, oldDM.ID, PriorityHigh, true); err != nil {
		t.Fatal(err)
	}
	clk.t = t0.Add(2 * time.Hour)
	newMsg := alice.msg(t, ch, clk.t.UnixMilli(), "new")
	newDM := alice.env(t, proto.ToPeer(us.pub), clk.t.UnixMilli(), "new dm")
	bob := newSender(t, "bob")
	bobMsg := bob.msg(t, ch, clk.t.UnixMilli(), "bob")
	mustPut(t, s, newMsg, newDM, bobMsg)

	// Direct envelopes by age, with their inbox state.
	if n, err := s.PruneDirect(time.Hour, clk.t); err != nil || n != 1 {
		t.Fatalf("prune direct: removed %d, %v; want 1", n, err)
	}
	if _, err := s.Get(oldDM.From, oldDM.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("old DM still stored")
	}
	if _, err := s.Get(newDM.From, newDM.ID); err != nil {
		t.Errorf("new DM pruned: %v", err)
	}
	if items, _ := s.Inbox(InboxFilter{}); len(items) != 0 {
		t.Errorf("inbox lists %d pruned DMs", len(items))
	}

	// Streams silent for longer than maxAge go with the channel's prune.
	clk.t = t0.Add(5 * time.Hour)
	mustPut(t, s, alice.msg(t, ch, clk.t.UnixMilli(), "alice again"))
	if _, err := s.Prune(ch, 2*time.Hour, 0, clk.t); err != nil {
		t.Fatal(err)
	}
	marks, _ := s.SeqMarks(ch)
	if len(marks) != 1 || marks[0].Sender != alice.pub {
		t.Errorf("marks after prune: %+v, want alice's only (bob silent for 3 h)", marks)
	}

	// Dedupe entries older than SeenMaxAge are forgotten; newer stay.
	n, err := s.PruneSeen(clk.t)
	if err != nil || n != 5 {
		t.Fatalf("prune seen: removed %d, %v; want 5", n, err)
	}
	s.Close()
	s = openAt(t, path, Config{Now: clk.now})
	for _, tc := range []struct {
		se   *proto.SignedEnvelope
		want bool
	}{{oldMsg, false}, {newMsg, false}, {bobMsg, false}} {
		if seen, err := s.Seen(tc.se.From, tc.se.ID); err != nil || seen != tc.want {
			t.Errorf("seen %s = %v (%v), want %v", tc.se.ID, seen, err, tc.want)
		}
	}
	checkDB(t, s)
}

func TestQueue(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now, MaxQueuePerPeer: 5})
	us, bob, carol := newSender(t, "us"), newSender(t, "bob"), newSender(t, "carol")
	var envs []*proto.SignedEnvelope
	for i := range 6 {
		envs = append(envs, us.env(t, proto.ToPeer(bob.pub), t0.UnixMilli()+int64(i), "for bob"))
	}
	for _, se := range envs[:5] {
		if err := s.Enqueue(bob.pub, se); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	if err := s.Enqueue(bob.pub, envs[0]); err != nil {
		t.Fatalf("enqueue of a queued envelope: %v", err)
	}
	if err := s.Enqueue(bob.pub, envs[5]); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue beyond the bound: %v, want ErrQueueFull", err)
	}
	if err := s.Enqueue(carol.pub, envs[5]); err != nil {
		t.Fatalf("another peer's queue is separate: %v", err)
	}
	if q := mustStats(t, s).Queues; q[bob.pub] != 5 || q[carol.pub] != 1 {
		t.Fatalf("queue sizes %v, want bob 5, carol 1", q)
	}

	s.Close() // queues are durable
	s = openAt(t, path, Config{Now: clk.now, MaxQueuePerPeer: 5})
	pending, err := s.Pending(bob.pub)
	if err != nil || len(pending) != 5 {
		t.Fatalf("pending: %d, %v; want 5", len(pending), err)
	}
	for i, se := range pending {
		if se.ID != envs[i].ID {
			t.Errorf("pending[%d] = %s, want %s (oldest first)", i, se.ID, envs[i].ID)
		}
	}
	if err := s.Ack(bob.pub, envs[0].ID, envs[2].ID, uuid.New()); err != nil {
		t.Fatal(err)
	}
	pending, _ = s.Pending(bob.pub)
	if len(pending) != 3 || pending[0].ID != envs[1].ID || pending[1].ID != envs[3].ID {
		t.Fatalf("after ack: %d pending, want envelopes 1, 3, 4", len(pending))
	}
	if err := s.Enqueue(bob.pub, envs[5]); err != nil {
		t.Fatalf("enqueue after ack: %v", err)
	}
	// AckQueued: an id listed twice is one acknowledgement, and an id
	// not queued is handed back once.
	other := uuid.New()
	acked, rest, err := s.AckQueued(bob.pub, []uuid.UUID{envs[1].ID, envs[1].ID, other, other})
	if err != nil || acked != 1 || len(rest) != 1 || rest[0] != other {
		t.Fatalf("AckQueued with repeats: %d acked, rest %v, %v; want 1 and [%s]", acked, rest, err, other)
	}
	// Two acks of one id at once (a peer acking on two links): one
	// removes it, and only one counts it.
	if err := s.Enqueue(bob.pub, envs[1]); err != nil {
		t.Fatalf("enqueue again: %v", err)
	}
	counts := make(chan int, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, _, err := s.AckQueued(bob.pub, []uuid.UUID{envs[1].ID})
			if err != nil {
				t.Error(err)
			}
			counts <- n
		})
	}
	wg.Wait()
	close(counts)
	total := 0
	for n := range counts {
		total += n
	}
	if total != 1 {
		t.Fatalf("8 racing acks of one queued id counted %d removals, want 1", total)
	}
	if err := s.Enqueue(bob.pub, envs[1]); err != nil {
		t.Fatalf("enqueue again: %v", err)
	}

	// Expiry: ts + ttl before now.
	clk.t = t0.Add(proto.DefaultTTL*time.Second + 4*time.Millisecond)
	pending, err = s.Pending(bob.pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].ID != envs[4].ID {
		t.Fatalf("after expiry of the older ones: %d pending, want envelopes 4 and 5", len(pending))
	}
	if st := mustStats(t, s); st.QueueExpired != 2 || st.Queues[bob.pub] != 2 {
		t.Errorf("expired %d, bob's queue %d; want 2 and 2", st.QueueExpired, st.Queues[bob.pub])
	}
	n, err := s.ExpireQueues(t0.Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("expire queues: %d, %v; want 3", n, err)
	}
	if q := mustStats(t, s).Queues; len(q) != 0 {
		t.Errorf("queues after expiry: %v", q)
	}
}

func TestInbox(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	alice, us := newSender(t, "alice"), newSender(t, "us")
	var envs []*proto.SignedEnvelope
	for i := range 5 {
		envs = append(envs, alice.env(t, proto.ToPeer(us.pub), t0.UnixMilli()+int64(i), "dm"))
	}
	mustPut(t, s, envs...)
	if err := s.SetInbox(alice.pub, uuid.New(), PriorityHigh, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("set inbox of an unknown envelope: %v, want ErrNotFound", err)
	}
	if err := s.MarkRead(envs[0].From, envs[0].ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("mark read without inbox state: %v, want ErrNotFound", err)
	}
	prios := []Priority{PriorityHigh, PriorityNormal, PriorityLow, PriorityNormal}
	for i, p := range prios {
		clk.t = t0.Add(time.Duration(i) * time.Second)
		if err := s.SetInbox(envs[i].From, envs[i].ID, p, p != PriorityLow); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = t0.Add(time.Minute)
	if err := s.MarkRead(envs[1].From, envs[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRead(envs[1].From, envs[1].ID); err != nil {
		t.Fatalf("mark read twice: %v", err)
	}
	// Setting it again changes priority, keeps delivery time and read state.
	if err := s.SetInbox(envs[1].From, envs[1].ID, PriorityLow, false); err != nil {
		t.Fatal(err)
	}

	all, err := s.Inbox(InboxFilter{})
	if err != nil || len(all) != 4 {
		t.Fatalf("inbox: %d items, %v; want 4", len(all), err)
	}
	for i, it := range all {
		if it.ID != envs[i].ID || !it.Delivered.Equal(t0.Add(time.Duration(i)*time.Second)) {
			t.Errorf("item %d = %s delivered %v, want %s at +%ds (newest last)", i, it.ID, it.Delivered, envs[i].ID, i)
		}
		if it.From != alice.pub || it.Kind != proto.KindMessage {
			t.Errorf("item %d lacks envelope metadata: %+v", i, it.Meta)
		}
	}
	if it := all[1]; !it.Read || !it.ReadAt.Equal(t0.Add(time.Minute)) || it.Priority != PriorityLow || it.Wakes {
		t.Errorf("re-set read item: %+v", it)
	}
	if it := all[0]; it.Read || !it.ReadAt.IsZero() || it.Priority != PriorityHigh || !it.Wakes {
		t.Errorf("unread item: %+v", it)
	}
	unread, _ := s.Inbox(InboxFilter{UnreadOnly: true})
	if len(unread) != 3 {
		t.Errorf("unread: %d items, want 3", len(unread))
	}
	last2, _ := s.Inbox(InboxFilter{Limit: 2})
	if len(last2) != 2 || last2[0].ID != envs[2].ID || last2[1].ID != envs[3].ID {
		t.Errorf("limit 2: want the newest two, oldest first")
	}
	since, _ := s.Inbox(InboxFilter{Since: t0.Add(2 * time.Second), UnreadOnly: true})
	if len(since) != 2 || since[0].ID != envs[2].ID {
		t.Errorf("since +2s unread: %d items, want 2", len(since))
	}
	if err := s.SetInbox(envs[4].From, envs[4].ID, Priority(9), true); err == nil {
		t.Error("unknown priority accepted")
	}
}

// FindRequest finds a Request in the inbox by its request id, skipping
// other kinds and requests stored but not in the inbox.
func TestFindRequest(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice, us := newSender(t, "alice"), newSender(t, "us")
	request := func(reqID uuid.UUID, ts int64) *proto.SignedEnvelope {
		d := proto.ToPeer(us.pub)
		alice.seq[d]++
		e := &proto.Envelope{ID: proto.NewID(), From: alice.pub, To: d, Kind: proto.KindRequest, TS: ts,
			TTL: proto.DefaultTTL, Seq: alice.seq[d], Epoch: alice.epoch,
			Request: &proto.Request{RequestID: reqID, Intent: "build"}}
		se, err := proto.SignEnvelope(alice.key, e)
		if err != nil {
			t.Fatal(err)
		}
		return se
	}
	wanted, other, notInInbox := proto.NewID(), proto.NewID(), proto.NewID()
	ts := time.Now().UnixMilli()
	ds := []Delivery{
		{Env: request(wanted, ts), Inbox: true, Priority: PriorityHigh, Wakes: true},
		{Env: alice.env(t, proto.ToPeer(us.pub), ts+1, "a DM"), Inbox: true, Priority: PriorityHigh},
		{Env: request(other, ts+2), Inbox: true, Priority: PriorityHigh},
		{Env: request(notInInbox, ts+3)},
	}
	if _, err := s.Deliver(ds); err != nil {
		t.Fatal(err)
	}
	se, err := s.FindRequest(wanted)
	if err != nil {
		t.Fatal(err)
	}
	if se.ID != ds[0].Env.ID || se.Request.RequestID != wanted || !se.From.Equal(alice.pub) {
		t.Fatalf("found %s (request %s), want %s", se.ID, se.Request.RequestID, ds[0].Env.ID)
	}
	if err := se.Verify(); err != nil {
		t.Fatalf("the envelope found does not verify: %v", err)
	}
	for _, id := range []uuid.UUID{notInInbox, ds[1].Env.ID, proto.NewID()} {
		if _, err := s.FindRequest(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("FindRequest(%s) = %v, want ErrNotFound", id, err)
		}
	}
}

// TestIdlePruneWritesNothing: retention passes with nothing due (an idle
// node's, every minute) commit no transaction: nothing is written or
// synced. A pass that removes something still commits.
func TestIdlePruneWritesNothing(t *testing.T) {
	s, _ := openTest(t, Config{})
	now := time.Now()
	before, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneSeen(now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneDirect(time.Hour, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ExpireQueues(now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneDeliveries(now, 10); err != nil {
		t.Fatal(err)
	}
	after, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Commits != before.Commits {
		t.Errorf("%d commits for passes with nothing to prune", after.Commits-before.Commits)
	}
	if after.Unwritten-before.Unwritten != 4 {
		t.Errorf("%d batches rolled back as unwritten, want 4", after.Unwritten-before.Unwritten)
	}
}
