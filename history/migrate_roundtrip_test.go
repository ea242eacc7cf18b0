package history

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// reopenDowngraded closes s, rewrites its file at path in the layout of
// schema version (downgrade), checks that the file says so, and opens it
// again: the store upgrades it, and checkDB finds it sound.
func reopenDowngraded(t *testing.T, s *Store, path string, version uint64, downgrade func(testing.TB, string), cfg Config) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade(t, path)
	if v := schemaAt(t, path); v != version {
		t.Fatalf("schema %d after the downgrade, want %d", v, version)
	}
	s = openAt(t, path, cfg)
	checkDB(t, s)
	return s
}

// downgradeToV1 rewrites a store at path in the schema 1 layout of meshd
// 9798b00 (envelopes and inbox state keyed by id alone, no senders
// bucket, pending numbers one key each), as that release would have
// written it. It needs ids unique across senders, as schema 1 did.
func downgradeToV1(tb testing.TB, path string) {
	tb.Helper()
	downgradeToV2(tb, path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		cut := func(name []byte, keyLen, keep int) error {
			b := tx.Bucket(name)
			var keys [][]byte
			b.ForEach(func(k, _ []byte) error {
				if len(k) == keyLen {
					keys = append(keys, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range keys {
				v := bytes.Clone(b.Get(k))
				if err := b.Delete(k); err != nil {
					return err
				}
				if err := b.Put(k[:keep], v); err != nil {
					return err
				}
			}
			return nil
		}
		for _, c := range []struct {
			name         []byte
			keyLen, keep int
		}{
			{bucketEnv, envKLen, idLen},
			{bucketDirIdx, tsLen + envKLen, tsLen + idLen},
			{bucketInbox, envKLen, idLen},
			{bucketInboxT, tsLen + envKLen, tsLen + idLen},
		} {
			if err := cut(c.name, c.keyLen, c.keep); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketSenders); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(1))
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// fillStore puts n envelopes from four senders in s: half channel
// Messages, half DMs, all in the inbox, every third read.
func fillStore(tb testing.TB, s *Store, n int) {
	tb.Helper()
	us := newSender(tb, "us")
	senders := []*sender{newSender(tb, "a"), newSender(tb, "b"), newSender(tb, "c"), newSender(tb, "d")}
	ch := uuid.New()
	ts := t0.UnixMilli()
	for start := 0; start < n; start += 1000 {
		var ds []Delivery
		for i := start; i < min(start+1000, n); i++ {
			snd := senders[i%4]
			d := proto.ToChannel(ch)
			if i%2 == 0 {
				d = proto.ToPeer(us.pub)
			}
			ds = append(ds, Delivery{Env: snd.env(tb, d, ts+int64(i), body(1000)), Inbox: true, Priority: PriorityHigh, Wakes: true})
		}
		if _, err := s.Deliver(ds); err != nil {
			tb.Fatal(err)
		}
		for i, d := range ds {
			if i%3 == 0 {
				if err := s.MarkRead(d.Env.From, d.Env.ID); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
}

// storeDump is what a store holds, for comparisons.
func storeDump(tb testing.TB, s *Store) string {
	tb.Helper()
	var b bytes.Buffer
	items, err := s.Inbox(InboxFilter{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, it := range items {
		st, err := s.Get(it.From, it.ID)
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s %v %v %x\n", it.ID, it.From.Fingerprint(), it.Priority, it.Read, it.Delivered.UnixMilli(), st.Raw[len(st.Raw)-8:])
	}
	u, err := s.SenderUsages()
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(&b, "%v\n", u)
	st := mustStats(tb, s)
	fmt.Fprintf(&b, "%d %v %d\n", st.Envelopes, st.Channels, st.Direct)
	return b.String()
}

// TestUpgradeRoundTrip writes 3,000 envelopes, rewrites the store in the
// schema 1 layout, and checks that the upgrade gives back the same store.
func TestUpgradeRoundTrip(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, path := openTest(t, Config{Now: clk.now})
	fillStore(t, s, 3000)
	want := storeDump(t, s)
	s = reopenDowngraded(t, s, path, 1, downgradeToV1, Config{Now: clk.now})
	if got := storeDump(t, s); got != want {
		t.Fatalf("store after the upgrade differs:\n got %.300s\nwant %.300s", got, want)
	}
}

// BenchmarkUpgradeV1 times the upgrade of a schema 1 store of
// HISTORY_UPGRADE_N envelopes of 1 KB (default 10,000), all in the inbox,
// half of them DMs:
//
//	HISTORY_UPGRADE_N=100000 go test -run - -bench UpgradeV1 -benchtime 1x ./history
func BenchmarkUpgradeV1(b *testing.B) {
	n := 10000
	if v := os.Getenv("HISTORY_UPGRADE_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "v1.db")
	s := openAt(b, src, Config{Now: func() time.Time { return t0 }})
	fillStore(b, s, n)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	downgradeToV1(b, src)
	// As written by the old release: without the free pages the
	// downgrade left.
	if err := bolt.Compact(mustBolt(b, src+".c"), mustBoltRO(b, src), 4<<20); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(src+".c", src); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(src)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst := filepath.Join(dir, fmt.Sprintf("up%d.db", i))
		copyFile(b, src, dst)
		b.StartTimer()
		s, err := Open(dst, Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		after, _ := os.Stat(dst)
		s.Close()
		os.Remove(dst)
		b.ReportMetric(float64(fi.Size())/(1<<20), "MiB-before")
		b.ReportMetric(float64(after.Size())/(1<<20), "MiB-after")
		b.StartTimer()
	}
}

func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}

func mustBolt(tb testing.TB, path string) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func mustBoltRO(tb testing.TB, path string) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
