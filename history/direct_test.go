package history

import (
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestOwnDirectKeptAndPruned: a DM this node queues for a peer is kept in
// the store (Direct lists it with the peer's DMs to us), and when
// retention removes it, InboxPruned reports it as Sent so its sent-folder
// file goes too; a peer's DM without inbox state is not reported.
func TestOwnDirectKeptAndPruned(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	me, bob := newSender(t, "me"), newSender(t, "bob")
	var gone []PrunedItem
	s, _ := openTest(t, Config{Now: clk.now, Self: me.pub, InboxPruned: func(p []PrunedItem) { gone = append(gone, p...) }})
	mine := me.env(t, proto.ToPeer(bob.pub), t0.UnixMilli(), "to bob")
	if err := s.Enqueue(bob.pub, mine); err != nil {
		t.Fatal(err)
	}
	theirs := bob.env(t, proto.ToPeer(me.pub), t0.UnixMilli()+1, "to me")
	mustPut(t, s, theirs)
	got, err := s.Direct(time.Time{}, 0, func(m *Meta) bool { return m.To.Kind == proto.DestPeer })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != theirs.ID || got[1].ID != mine.ID {
		t.Fatalf("Direct lists %d envelopes (%v), want bob's then ours", len(got), got)
	}
	if st, err := getID(s, mine.ID); err != nil || st.From != me.pub {
		t.Fatalf("our own DM in the store: %v, %v", st, err)
	}
	// Enqueueing again (a retry) keeps one copy.
	if err := s.Enqueue(bob.pub, mine); err != nil {
		t.Fatal(err)
	}
	clk.t = t0.Add(100 * time.Hour)
	if _, err := s.PruneDirect(72*time.Hour, clk.t); err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0].ID != mine.ID || !gone[0].Sent || !gone[0].Delivered.Equal(time.UnixMilli(mine.TS)) {
		t.Fatalf("pruned items %+v, want our DM as Sent", gone)
	}
	checkDB(t, s)
}
