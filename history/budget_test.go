package history

import (
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestSenderBudget fills one sender's budget with DMs: past it, Deliver
// refuses the sender's DMs (not remembered as seen, so a later copy is
// judged again), other senders and channel Messages are unaffected, and
// retention gives the room back. The usage survives a reopen.
func TestSenderBudget(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now, MaxSenderBytes: 4000, MaxSenderEnvelopes: 100})
	flood, alice, us := newSender(t, "flood"), newSender(t, "alice"), newSender(t, "us")
	dm := func(from *sender, i int) Delivery {
		return Delivery{Env: from.env(t, proto.ToPeer(us.pub), t0.UnixMilli()+int64(i), body(800)), Inbox: true, Priority: PriorityHigh, Wakes: true}
	}
	var ds []Delivery
	for i := range 8 {
		ds = append(ds, dm(flood, i))
	}
	ds = append(ds, dm(alice, 0))
	out, err := s.Deliver(ds)
	if err != nil {
		t.Fatal(err)
	}
	size := len(ds[0].Env.Raw)
	fit := 4000 / size
	for i, o := range out[:8] {
		want := Added
		if i >= fit {
			want = OverBudget
		}
		if o != want {
			t.Fatalf("flood DM #%d (%d bytes, %d fit): %s, want %s", i, size, fit, o, want)
		}
	}
	if out[8] != Added {
		t.Fatalf("another sender's DM: %s, want added", out[8])
	}
	u, err := s.SenderUsage(flood.pub)
	if err != nil || u.Envelopes != uint64(fit) || u.Bytes != uint64(fit*size) || u.Bytes > 4000 {
		t.Fatalf("usage %+v, %v; want %d envelopes", u, err, fit)
	}
	refused := ds[fit].Env
	if seen, _ := s.Seen(refused.From, refused.ID); seen {
		t.Fatal("a refused envelope is remembered as seen")
	}
	if items, _ := s.Inbox(InboxFilter{}); len(items) != fit+1 {
		t.Fatalf("inbox holds %d items, want %d", len(items), fit+1)
	}
	if st := mustStats(t, s); st.OverBudget != uint64(8-fit) {
		t.Fatalf("stats count %d over budget, want %d", st.OverBudget, 8-fit)
	}
	// A channel Message is not a DM: no budget.
	if out, err := s.Deliver([]Delivery{{Env: flood.msg(t, proto.NewID(), t0.UnixMilli(), body(3000))}}); err != nil || out[0] != Added {
		t.Fatalf("channel message from a sender out of DM budget: %v %v", out, err)
	}

	// The count limit bites too.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Config{Now: clk.now, MaxSenderBytes: 1 << 20, MaxSenderEnvelopes: fit + 1})
	if u2, _ := s.SenderUsage(flood.pub); u2 != u {
		t.Fatalf("usage after reopening %+v, want %+v", u2, u)
	}
	out, err = s.Deliver([]Delivery{dm(flood, 20), dm(flood, 21)})
	if err != nil || out[0] != Added || out[1] != OverBudget {
		t.Fatalf("count limit: %v %v", out, err)
	}

	// Retention frees the budget; the refused DM is taken when re-sent.
	clk.t = t0.Add(time.Hour)
	if _, err := s.PruneDirect(time.Minute, clk.t); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.SenderUsage(flood.pub); u != (Usage{}) {
		t.Fatalf("usage after pruning: %+v", u)
	}
	if out, err := s.Deliver([]Delivery{{Env: refused, Inbox: true, Priority: PriorityHigh}}); err != nil || out[0] != Added {
		t.Fatalf("refused DM re-sent after pruning: %v %v", out, err)
	}
	checkDB(t, s)
}
