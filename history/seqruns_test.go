package history

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// A hole followed by more arrivals than Config.MaxPendingSeqs is kept:
// the bound counts holes, not numbers, so live traffic past a lost
// envelope does not give it up before catch-up fills it. (Schema 2 kept a
// key per number and gave the hole up after 1,024 later arrivals.)
func TestHoleKeptPastPendingBound(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{MaxPendingSeqs: 16})
	alice := newSender(t, "alice")
	d := proto.ToChannel(uuid.New())
	const top = 2000
	var batch []*proto.SignedEnvelope
	flush := func() {
		mustPut(t, s, batch...)
		batch = batch[:0]
	}
	for n := uint64(1); n <= top; n++ {
		if n == 2 {
			continue
		}
		batch = append(batch, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
		if len(batch) == 500 {
			flush()
		}
	}
	flush()
	g, err := s.Gaps(d)
	if err != nil || len(g) != 1 {
		t.Fatalf("gaps: %+v, %v", g, err)
	}
	if st := g[0]; st.Lost != 0 || st.Last != 1 || st.Count != top-1 || !reflect.DeepEqual(st.Missing, []SeqRange{{2, 2}}) {
		t.Fatalf("after 1 and 3..%d: %+v, want the hole at 2 kept, nothing lost", top, st)
	}
	mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+2, 2, "s"))
	g, _ = s.Gaps(d)
	if st := g[0]; !st.Contiguous() || st.Last != top || st.Count != top || st.Lost != 0 {
		t.Fatalf("after the hole filled: %+v, want contiguous 1..%d", st, top)
	}
	checkDB(t, s)
}

// Numbers that arrive in any order are kept as maximal runs: joining a
// run below, one above, or both, and a stream with more holes than the
// bound gives up its lowest one.
func TestPendingRunsJoin(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{MaxPendingSeqs: 2})
	alice := newSender(t, "alice")
	d := proto.ToChannel(uuid.New())
	put := func(seqs ...uint64) Stream {
		t.Helper()
		for _, n := range seqs {
			mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
		}
		g, err := s.Gaps(d)
		if err != nil || len(g) != 1 {
			t.Fatalf("gaps: %+v, %v", g, err)
		}
		return g[0]
	}
	put(10)
	// 20, 22, then 21 joins both; 18 and 19 extend the run down; 24 up.
	st := put(20, 22, 21, 19, 18, 23)
	if st.Lost != 0 || !reflect.DeepEqual(st.Missing, []SeqRange{{11, 17}}) || st.Count != 7 || st.Max != 23 {
		t.Fatalf("after 18..23 in pieces: %+v, want one hole 11..17", st)
	}
	if r := runsOf(t, s); !reflect.DeepEqual(r, [][2]uint64{{18, 23}}) {
		t.Fatalf("pending runs %v, want [18 23]", r)
	}
	st = put(5, 30) // three holes: 6..9, 11..17 and 24..29; bound 2
	if st.Lost != 7 || st.First != 10 || st.Last != 23 || !reflect.DeepEqual(st.Missing, []SeqRange{{6, 9}, {24, 29}}) {
		t.Fatalf("after overflow: %+v, want the lowest hole above the run (11..17) given up", st)
	}
	st = put(9, 8, 7, 6) // down to the pending 5
	if st.Lost != 7 || st.First != 5 || st.Last != 23 || !reflect.DeepEqual(st.Missing, []SeqRange{{24, 29}}) {
		t.Fatalf("after 9..6: %+v, want the run 5..23", st)
	}
	if r := runsOf(t, s); !reflect.DeepEqual(r, [][2]uint64{{30, 30}}) {
		t.Fatalf("pending runs %v, want [30 30]", r)
	}
	checkDB(t, s)
}

// TestPendingRunsRandomOrder puts 1,000 numbers in random order, in
// batches of several sizes, and checks after each batch that the pending
// runs add up to the stream record (count and numbers), that none touches
// the stream's run, and that all of them end as one run. A cursor's Prev
// in a transaction that had deleted runs once left a run beside the
// stream's run unmerged.
func TestPendingRunsRandomOrder(t *testing.T) {
	t.Parallel()
	for _, bs := range []int{1, 7, 256} {
		s, _ := openTest(t, Config{})
		alice := newSender(t, "alice")
		d := proto.ToChannel(uuid.New())
		perm := rand.Perm(1000)
		t.Logf("batch %d, order %v...", bs, perm[:8])
		check := func(after int) {
			t.Helper()
			var m markRec
			if err := s.db.View(func(tx *bolt.Tx) error {
				_, v := tx.Bucket(bucketMarks).Cursor().First()
				var err error
				m, err = decodeMark(v)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var sum uint64
			runs := runsOf(t, s)
			for _, r := range runs {
				sum += r[1] - r[0] + 1
				if r[1]+1 == m.lo || r[0] == m.hi+1 {
					t.Fatalf("batch %d, after %d: run %v beside the stream's run %d..%d", bs, after, r, m.lo, m.hi)
				}
			}
			if sum != m.pending || uint64(len(runs)) != m.runs {
				t.Fatalf("batch %d, after %d: record %+v, but %d runs of %d numbers", bs, after, m, len(runs), sum)
			}
		}
		var batch []*proto.SignedEnvelope
		for k, i := range perm {
			n := uint64(i + 1)
			batch = append(batch, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
			if len(batch) == bs || k == len(perm)-1 {
				mustPut(t, s, batch...)
				batch = batch[:0]
				check(k + 1)
			}
		}
		if g, err := s.Gaps(d); err != nil || !g[0].Contiguous() || g[0].Count != 1000 || g[0].Lost != 0 {
			t.Fatalf("batch %d: %+v %v, want 1..1000 contiguous", bs, g, err)
		}
	}
}

// runsOf lists the pending runs in s.
func runsOf(t *testing.T, s *Store) [][2]uint64 {
	t.Helper()
	var out [][2]uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			out = append(out, [2]uint64{binary.BigEndian.Uint64(k[len(k)-8:]), binary.BigEndian.Uint64(v)})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// downgradeToV2 rewrites a schema 3 store at path in the schema 2 layout:
// a key per pending number in seqs, stream records without their count of
// runs.
func downgradeToV2(tb testing.TB, path string) {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		seqs, err := tx.CreateBucket([]byte("seqs"))
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error {
			sk := k[:len(k)-8]
			for n := binary.BigEndian.Uint64(k[len(sk):]); n <= binary.BigEndian.Uint64(v); n++ {
				if err := seqs.Put(seqKey(sk, n), present); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketRuns); err != nil {
			return err
		}
		marks := tx.Bucket(bucketMarks)
		var keys, vals [][]byte
		marks.ForEach(func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v[:markRecLenV2]))
			return nil
		})
		for i := range keys {
			if err := marks.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(2))
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// TestUpgradeV2PendingRuns writes streams with holes, rewrites the store
// in the schema 2 layout, and checks that the upgrade gives back the same
// streams, runs and all, and that the holes still fill.
func TestUpgradeV2PendingRuns(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now})
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	d := proto.ToChannel(uuid.New())
	for _, n := range []uint64{1, 3, 4, 5, 9, 12, 13, 40} {
		mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
	}
	for _, n := range []uint64{7, 8, 10} {
		mustPut(t, s, bob.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
	}
	want, err := s.Gaps(d)
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := runsOf(t, s)
	if len(wantRuns) != 5 {
		t.Fatalf("runs before: %v, want 5", wantRuns)
	}
	s = reopenDowngraded(t, s, path, 2, downgradeToV2, Config{Now: clk.now})
	if v := schemaAt2(t, s); v != schemaVersion {
		t.Fatalf("schema %d after the upgrade, want %d", v, schemaVersion)
	}
	got, err := s.Gaps(d)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("streams after the upgrade:\n got %+v %v\nwant %+v", got, err, want)
	}
	if r := runsOf(t, s); !reflect.DeepEqual(r, wantRuns) {
		t.Fatalf("runs after the upgrade %v, want %v", r, wantRuns)
	}
	for _, n := range []uint64{2, 6, 7, 8, 10, 11} {
		mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
	}
	g, _ := s.Gaps(d)
	for _, st := range g {
		if st.Sender == alice.pub && (st.Last != 13 || !reflect.DeepEqual(st.Missing, []SeqRange{{14, 39}})) {
			t.Fatalf("alice after filling 2..11: %+v, want run 1..13, hole 14..39", st)
		}
	}
}

// schemaAt2 reads the schema of an open store.
func schemaAt2(t *testing.T, s *Store) uint64 {
	t.Helper()
	var v uint64
	if err := s.db.View(func(tx *bolt.Tx) error {
		v = getU64(tx.Bucket(bucketMeta).Get(metaSchema))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}
