package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestNewEpochAfterLostState: a sender that lost its store starts a new
// epoch numbering from 1; receivers take its messages as a new stream (no
// replay, no gap), and a reader that was away catches up both epochs.
func TestNewEpochAfterLostState(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	b := m.startWith(1, nil, tcpAddr(t, a))
	c := m.startWith(2, nil, tcpAddr(t, a))
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, b, "ch")
	waitPolicy(t, c, "ch")
	waitFor(t, 10*time.Second, "b-c link", func() bool { return linked(b, m.ids[2].Pub) })
	ep1 := b.out.Counter().Epoch()
	for i := 0; i < 5; i++ {
		if _, err := b.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("epoch one %d", i)}); err != nil {
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
	ep2 := b.out.Counter().Epoch()
	if ep2 == ep1 || !b.out.Counter().Fresh() {
		t.Fatalf("after losing its store b kept epoch %s (fresh %v)", ep2, b.out.Counter().Fresh())
	}
	waitFor(t, 10*time.Second, "b linked", func() bool { return linked(b, m.ids[0].Pub) })
	for i := 0; i < 5; i++ {
		sent, err := b.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("epoch two %d", i)})
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
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
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
	return finished > 0 && n.metrics.Get("sync.rounds") == uint64(finished) && n.rx.Sync.Idle()
}
