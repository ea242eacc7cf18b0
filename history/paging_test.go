package history

import (
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// pageAll pages req from the responder a into the requester b as a
// catch-up does, storing every page, and returns how many pages it took.
func pageAll(t *testing.T, a, b *Store, req *proto.HistoryRequest, limit int) int {
	t.Helper()
	pages := 0
	for req != nil {
		if pages++; pages > limit {
			t.Fatalf("paging does not end within %d pages", limit)
		}
		page, more := history(t, a, req, false)
		if _, err := b.PutBatch(page, true); err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
		req = NextHistoryRequest(req, page)
	}
	return pages
}

// TestPagingKeepsAHoleItsPeerHolds: a sender numbers an envelope before it
// stamps its time, so with several sends at once number 100 can carry a
// later ts than number 101. A page cut between them held 101 and not 100.
// Raising the stream's mark to 101 skipped 100 for the rest of the
// paging, and the thousands of numbers paged in above the hole overflowed
// the store's pending bound (MaxPendingSeqs), which gave the hole up as
// lost: the round that asks again from the stored marks then asked from
// above it, and number 100 was never fetched (TestCatchUpConvergence held
// 4,999 of 5,000). Paging now keeps the mark below the hole while its
// peer can fill it, so one paging pass fetches every envelope.
func TestPagingKeepsAHoleItsPeerHolds(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	a, _ := openTest(t, Config{Now: clk.now})
	b, _ := openTest(t, Config{Now: clk.now}) // the default pending bound
	alice := newSender(t, "alice")
	ch := uuid.New()
	const n = 3000
	envs := make([]*proto.SignedEnvelope, 0, n)
	for seq := uint64(1); seq <= n; seq++ {
		ts := t0.UnixMilli() + int64(seq)
		switch seq { // two sends at once: 100 stamped after 101
		case 100:
			ts++
		case 101:
			ts--
		}
		envs = append(envs, alice.envSeq(t, proto.ToChannel(ch), ts, seq, "c"))
	}
	for i := 0; i < n; i += 500 {
		mustPut(t, a, envs[i:i+500]...)
	}

	pages := pageAll(t, a, b, historyReq(ch, 0, 100, proto.MaxHistoryBytes), 2*n/100)
	// Then what holesFrom does: ask again from the stored marks.
	marks, err := b.SeqMarks(ch)
	if err != nil {
		t.Fatal(err)
	}
	pageAll(t, a, b, historyReq(ch, 0, 100, proto.MaxHistoryBytes, marks...), 2*n/100)

	for _, se := range envs {
		if _, err := b.Get(se.From, se.ID); err != nil {
			g, _ := b.Gaps(proto.ToChannel(ch))
			t.Fatalf("seq %d never fetched (%v); stream %+v", se.Seq, err, g)
		}
	}
	g, err := b.Gaps(proto.ToChannel(ch))
	if err != nil || len(g) != 1 || !g[0].Contiguous() || g[0].Lost != 0 || g[0].Last != n {
		t.Fatalf("stream %+v, %v; want 1..%d contiguous, nothing lost", g, err, n)
	}
	t.Logf("%d pages", pages)
}

// TestPagingPastAHoleItsPeerLacks: when the responder lacks the number
// the mark waits for, the next page fills nothing and the mark rises past
// the hole (as before), so paging still ends, with every envelope the
// responder holds fetched and at most one page more than without the
// hole.
func TestPagingPastAHoleItsPeerLacks(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	a, _ := openTest(t, Config{Now: clk.now})
	b, _ := openTest(t, Config{Now: clk.now})
	alice := newSender(t, "alice")
	ch := uuid.New()
	const n = 1000
	var held []*proto.SignedEnvelope
	for seq := uint64(1); seq <= n; seq++ {
		ts := t0.UnixMilli() + int64(seq)
		if seq == 101 {
			ts -= 2 // in the first page, above the hole at 100
		}
		se := alice.envSeq(t, proto.ToChannel(ch), ts, seq, "c")
		if seq != 100 {
			held = append(held, se)
		}
	}
	mustPut(t, a, held...)
	pages := pageAll(t, a, b, historyReq(ch, 0, 100, proto.MaxHistoryBytes), n/100+2)
	for _, se := range held {
		if _, err := b.Get(se.From, se.ID); err != nil {
			t.Fatalf("seq %d not fetched: %v", se.Seq, err)
		}
	}
	t.Logf("%d pages", pages)
}

// TestNextMark: the next page's mark of one stream.
func TestNextMark(t *testing.T) {
	t.Parallel()
	set := func(ns ...uint64) map[uint64]bool {
		m := map[uint64]bool{}
		for _, n := range ns {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		mark   uint64
		marked bool
		seqs   map[uint64]bool
		page   int
		want   uint64
	}{
		{"contiguous from the mark", 10, true, set(11, 12, 13), 3, 13},
		{"hole below the last", 10, true, set(11, 12, 14), 3, 12},
		{"unmarked, hole below the last", 0, false, set(5, 6, 8), 3, 6},
		{"unmarked, contiguous", 0, false, set(5, 6, 7), 3, 7},
		{"no progress from the mark", 10, true, set(12, 13), 2, 13},
		{"more than half the page again", 10, true, set(11, 13, 14, 15), 4, 15},
		{"half the page again", 10, true, set(11, 12, 14, 15), 4, 12},
	} {
		if got := nextMark(tc.mark, tc.marked, tc.seqs, tc.page); got != tc.want {
			t.Errorf("%s: nextMark = %d, want %d", tc.name, got, tc.want)
		}
	}
}
