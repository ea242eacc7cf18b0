package proto

import (
	"sync"
	"testing"

	"github.com/google/uuid"
)

func TestSeqCounter(t *testing.T) {
	c := NewSeqCounter()
	if c.Epoch() == uuid.Nil || c.Epoch() == NewSeqCounter().Epoch() {
		t.Fatal("each counter needs a fresh, non-nil epoch")
	}
	ch, dm := ToChannel(chanID), ToPeer(bob)
	for want := uint64(1); want <= 3; want++ {
		if got := c.Next(ch); got != want {
			t.Fatalf("channel seq %d, want %d", got, want)
		}
	}
	if got := c.Next(dm); got != 1 {
		t.Fatalf("destinations share a counter: DM seq %d, want 1", got)
	}
	if got := c.Next(ToChannel(epochA)); got != 1 {
		t.Fatalf("another channel: %d, want 1", got)
	}
	snap := c.Snapshot()
	if snap[ch] != 3 || snap[dm] != 1 || len(snap) != 3 {
		t.Fatalf("Snapshot = %v", snap)
	}
	snap[ch] = 100 // the snapshot is a copy
	if got := c.Next(ch); got != 4 {
		t.Fatalf("Snapshot aliases the counter: next %d", got)
	}

	r := RestoreSeqCounter(c.Epoch(), c.Snapshot())
	if r.Epoch() != c.Epoch() {
		t.Fatal("restore lost the epoch")
	}
	if got := r.Next(ch); got != 5 {
		t.Fatalf("restored counter continues at %d, want 5", got)
	}
	if got := r.Next(ToOrg("acme")); got != 1 {
		t.Fatalf("new destination after restore: %d", got)
	}
	in := map[Destination]uint64{ch: 9}
	r2 := RestoreSeqCounter(epochB, in)
	in[ch] = 0
	if got := r2.Next(ch); got != 10 {
		t.Fatalf("RestoreSeqCounter aliases its input: next %d", got)
	}
}

func TestSeqCounterConcurrent(t *testing.T) {
	c := NewSeqCounter()
	dests := []Destination{ToChannel(chanID), ToPeer(bob), ToOrg("acme")}
	const workers, each = 8, 500
	var mu sync.Mutex
	seen := map[Destination]map[uint64]bool{}
	for _, d := range dests {
		seen[d] = map[uint64]bool{}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			got := make([]uint64, 0, each)
			d := dests[w%len(dests)]
			for range each {
				got = append(got, c.Next(d))
				_ = c.Snapshot()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, n := range got {
				if seen[d][n] {
					t.Errorf("seq %d handed out twice for %s", n, d)
				}
				seen[d][n] = true
			}
		})
	}
	wg.Wait()
	snap := c.Snapshot()
	for _, d := range dests {
		n := uint64(len(seen[d]))
		if snap[d] != n {
			t.Errorf("%s: last %d, handed out %d", d, snap[d], n)
		}
		for i := uint64(1); i <= n; i++ {
			if !seen[d][i] {
				t.Errorf("%s: seq %d skipped", d, i)
			}
		}
	}
}

func TestSeqTracker(t *testing.T) {
	tr := NewSeqTracker()
	k := SeqKey{From: alice, To: ToChannel(chanID), Epoch: epochA}
	steps := []struct {
		seq  uint64
		want SeqVerdict
		last uint64
	}{
		{5, SeqNewEpoch, 5}, // first sight: whatever the number
		{6, SeqNext, 6},
		{6, SeqOld, 6}, // duplicate
		{3, SeqOld, 6}, // late
		{9, SeqGap, 9}, // 7 and 8 missing
		{8, SeqOld, 9}, // a gap filled late is old news to the tracker
		{10, SeqNext, 10},
	}
	for i, s := range steps {
		if got := tr.Observe(k, s.seq); got != s.want {
			t.Fatalf("step %d: Observe(%d) = %v, want %v", i, s.seq, got, s.want)
		}
		if last, ok := tr.Last(k); !ok || last != s.last {
			t.Fatalf("step %d: Last = %d, %v; want %d", i, last, ok, s.last)
		}
	}
	// A new epoch resets: numbering restarting at 1 is not a replay.
	k2 := k
	k2.Epoch = epochB
	if got := tr.Observe(k2, 1); got != SeqNewEpoch {
		t.Fatalf("new epoch: %v", got)
	}
	if got := tr.Observe(k2, 2); got != SeqNext {
		t.Fatalf("new epoch next: %v", got)
	}
	if last, _ := tr.Last(k); last != 10 {
		t.Fatal("the old epoch's state changed")
	}
	// Streams are per sender and per destination.
	for _, other := range []SeqKey{
		{From: bob, To: k.To, Epoch: epochA},
		{From: alice, To: ToPeer(bob), Epoch: epochA},
	} {
		if got := tr.Observe(other, 10); got != SeqNewEpoch {
			t.Fatalf("%+v shares state: %v", other, got)
		}
	}
	if _, ok := tr.Last(SeqKey{From: carol}); ok {
		t.Fatal("Last of an unseen key reports ok")
	}
}

func TestNewIDs(t *testing.T) {
	a, b := NewID(), NewID()
	if a == b || a.Version() != 7 || a.Variant() != uuid.RFC4122 {
		t.Fatalf("NewID: %s %s", a, b)
	}
	e := NewEpoch()
	if e == NewEpoch() || e.Version() != 4 {
		t.Fatalf("NewEpoch: %s", e)
	}
}
