package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// damageFixture writes a store of n DMs, each in the inbox, and returns
// its bytes: enough pages for a tree of several levels in the big buckets.
func damageFixture(t testing.TB, n int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	var ds []Delivery
	for i := range n {
		ds = append(ds, Delivery{Env: alice.env(t, proto.ToPeer(bob.pub), t0.UnixMilli()+int64(i), body(100)), Inbox: true, Priority: PriorityNormal})
		if len(ds) == 200 || i == n-1 {
			if _, err := s.Deliver(ds); err != nil {
				t.Fatal(err)
			}
			ds = ds[:0]
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openDamaged writes b as a store and opens it; it must fail with an
// error, never a panic or a fault.
func openDamaged(t *testing.T, b []byte) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Config{LockTimeout: time.Second})
	if err == nil {
		s.Close()
	}
	return err
}

// rewriteMeta sets fn on both meta pages and fixes their checksums.
func rewriteMeta(b []byte, fn func(meta []byte)) {
	ps := int(binary.LittleEndian.Uint32(b[boltPageHeaderSize+8:]))
	for _, off := range []int{0, ps} {
		m := b[off+boltPageHeaderSize : off+boltPageHeaderSize+boltMetaSize]
		fn(m)
		h := fnv.New64a()
		h.Write(m[:56])
		binary.LittleEndian.PutUint64(m[56:], h.Sum64())
	}
}

func TestDamagedStoreIsReported(t *testing.T) {
	t.Parallel()
	good := damageFixture(t, 3000)
	rep, err := func() (CheckReport, error) {
		path := filepath.Join(t.TempDir(), "history.db")
		os.WriteFile(path, good, 0o600)
		return CheckFile(path)
	}()
	if err != nil || rep.Walked < 20 {
		t.Fatalf("the fixture: %+v, %v", rep, err)
	}
	ps := rep.PageSize
	// The root bucket's page, in the meta page of the higher txid: the
	// other one may name a page since freed.
	m0, m1 := parseMeta(good), parseMeta(good[ps:])
	if m1.txid > m0.txid {
		m0 = m1
	}
	rootPage := int(m0.root)
	flip := func(off, n int) []byte {
		b := append([]byte(nil), good...)
		for i := range n {
			b[off+i] ^= 0xA5
		}
		return b
	}
	cases := map[string][]byte{
		"empty":                 nil,
		"4 KiB":                 good[:4096],
		"16 KiB":                good[:16<<10],
		"mid-file":              good[:len(good)/2],
		"last page in use cut":  good[:int(rep.Pages-1)*ps],
		"one byte short":        good[:len(good)-1],
		"both meta pages":       flip(boltPageHeaderSize, 8),
		"root page header":      flip(rootPage*ps, 16),
		"root page elements":    flip(rootPage*ps+boltPageHeaderSize, 64),
		"page ids of tree page": flip(rootPage*ps+boltPageHeaderSize+8, 8),
	}
	cases["both meta pages"] = func() []byte {
		b := flip(boltPageHeaderSize, 8)
		copy(b[ps+boltPageHeaderSize:], b[boltPageHeaderSize:boltPageHeaderSize+8])
		return b
	}()
	// Every page beyond the metas, its header overwritten in turn.
	for p := 2; p*ps < len(good) && p < 40; p++ {
		cases["header of page "+strconv.Itoa(p)] = flip(p*ps, 16)
	}
	for name, b := range cases {
		err := openDamaged(t, b)
		if name == "one byte short" || len(b) == len(good) && err == nil {
			// A page the tree does not reach (free) may be overwritten
			// harmlessly; a byte short of a page may still hold every page.
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		var de *DamageError
		if err != nil && (!errors.As(err, &de) || de.Newer) {
			t.Errorf("%s: %v, want a DamageError", name, err)
		}
	}
	if err := openDamaged(t, good[:len(good)/2]); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("mid-file: %v, want it to say the file was cut short", err)
	}
	if err := openDamaged(t, nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty: %v", err)
	}
}

func TestNewerFormat(t *testing.T) {
	t.Parallel()
	good := damageFixture(t, 10)
	b := append([]byte(nil), good...)
	rewriteMeta(b, func(m []byte) { binary.LittleEndian.PutUint32(m[4:], boltVersion+1) })
	err := openDamaged(t, b)
	if !errors.Is(err, ErrNewerFormat) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("newer bbolt format: %v", err)
	}

	// Our schema, newer: written with bbolt directly.
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion+1)) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(path, Config{})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "schema is version") {
		t.Fatalf("newer schema: %v", err)
	}
}

// TestCreateIsAtomic: a new store appears whole under its name, and a
// stale temporary file from a crash does not stop it.
func TestCreateIsAtomic(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "history.db")
	if err := os.WriteFile(path+".new", []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path + ".new"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if _, err := CheckFile(path); err != nil {
		t.Fatal(err)
	}
}

// TestRandomDamageNeverPanics opens stores damaged at random: cut at a
// random length, bytes flipped in random pages, pages zeroed or swapped.
// Each open fails with ErrCorrupt or succeeds and reads; none panics or
// faults (either would end this test binary).
func TestRandomDamageNeverPanics(t *testing.T) {
	t.Parallel()
	good := damageFixture(t, 2000)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	// The opens are independent: four parallel subtests share them, each
	// with its own stream of the seed, so the work overlaps its file I/O.
	const parts = 4
	for k := range parts {
		t.Run(fmt.Sprintf("part%d", k), func(t *testing.T) {
			t.Parallel()
			damageRounds(t, good, rand.New(rand.NewPCG(seed, uint64(1+k))), (iterations+parts-1)/parts)
		})
	}
}

// damageRounds opens n copies of the store good, each damaged at random
// by r, and checks each is refused with ErrCorrupt or opens and reads.
func damageRounds(t *testing.T, good []byte, r *rand.Rand, n int) {
	ps := 4096
	pages := len(good) / ps
	var refused, opened int
	for i := range n {
		b := append([]byte(nil), good...)
		switch i % 4 {
		case 0:
			b = b[:r.IntN(len(b))]
		case 1:
			for range 1 + r.IntN(8) {
				b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			}
		case 2:
			p := r.IntN(pages)
			clear(b[p*ps : (p+1)*ps])
		case 3:
			p, q := r.IntN(pages), r.IntN(pages)
			tmp := append([]byte(nil), b[p*ps:(p+1)*ps]...)
			copy(b[p*ps:], b[q*ps:(q+1)*ps])
			copy(b[q*ps:], tmp)
		}
		path := filepath.Join(t.TempDir(), "history.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Config{LockTimeout: time.Second})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("iteration %d: %v, want ErrCorrupt", i, err)
			}
			refused++
			continue
		}
		opened++
		_, _ = s.Inbox(InboxFilter{})
		_, _ = s.ChannelMessages(uuid.New(), time.Time{}, 10)
		s.Close()
	}
	t.Logf("%d damaged stores refused, %d opened (damage in values or free pages)", refused, opened)
}

func TestRestore(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	a := alice.env(t, proto.ToPeer(bob.pub), t0.UnixMilli(), "one")
	b := alice.env(t, proto.ToPeer(bob.pub), t0.UnixMilli()+1, "two")
	at := t0.Add(time.Hour).Truncate(time.Second)
	added, err := s.Restore([]Restored{
		{Env: a, Priority: PriorityHigh, Delivered: at, Read: true},
		{Env: b, Priority: PriorityLow, Delivered: at.Add(time.Second), FromHistory: true},
		{Env: a, Priority: PriorityNormal, Delivered: at.Add(time.Minute)},
	})
	if err != nil || !added[0] || !added[1] || added[2] {
		t.Fatalf("restore: %v, %v", added, err)
	}
	items, err := s.Inbox(InboxFilter{})
	if err != nil || len(items) != 2 {
		t.Fatalf("inbox: %v, %v", items, err)
	}
	if it := items[0]; it.ID != a.ID || !it.Read || it.Priority != PriorityHigh || !it.Delivered.Equal(at) || !it.ReadAt.Equal(at) {
		t.Errorf("first item %+v", it)
	}
	if it := items[1]; it.ID != b.ID || it.Read || it.Priority != PriorityLow || !it.FromHistory {
		t.Errorf("second item %+v", it)
	}
	if unread, _ := s.Inbox(InboxFilter{UnreadOnly: true}); len(unread) != 1 {
		t.Errorf("unread: %d, want 1", len(unread))
	}
	if seen, _ := s.Seen(alice.pub, a.ID); !seen {
		t.Error("a restored envelope is not seen: it would be taken again")
	}

	// Marks of a channel stream restored with a hole are forgotten, so
	// history sync asks by time.
	ch := uuid.New()
	m1, _, m3 := alice.msg(t, ch, t0.UnixMilli(), "1"), alice.msg(t, ch, t0.UnixMilli()+1, "2"), alice.msg(t, ch, t0.UnixMilli()+2, "3")
	if _, err := s.Restore([]Restored{{Env: m1, Priority: PriorityNormal, Delivered: at}, {Env: m3, Priority: PriorityNormal, Delivered: at}}); err != nil {
		t.Fatal(err)
	}
	if marks, err := s.SeqMarks(ch); err != nil || len(marks) != 1 {
		t.Fatalf("marks before: %v, %v", marks, err)
	}
	if err := s.ForgetSeqMarks(); err != nil {
		t.Fatal(err)
	}
	if marks, err := s.SeqMarks(ch); err != nil || len(marks) != 0 {
		t.Fatalf("marks after: %v, %v", marks, err)
	}
	if err := s.ForgetSeqMarks(); err != nil {
		t.Fatalf("twice: %v", err)
	}
}

// TestCheckBigStore measures the check on a store of $MESHD_CHECK_BIG_MIB
// MiB (skipped unless set): a million-key bucket written with bbolt, then
// CheckFile and a full Open timed. docs/SECURITY.md gives the figures.
func TestCheckBigStore(t *testing.T) {
	t.Parallel()
	mib, _ := strconv.Atoi(os.Getenv("MESHD_CHECK_BIG_MIB"))
	if mib <= 0 {
		t.Skip("set MESHD_CHECK_BIG_MIB to measure the check on a big store")
	}
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(path, Config{MaxBytes: int64(mib+256) << 20})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 900)
	var key [16]byte
	written := 0
	for n := uint64(0); written < mib<<20; {
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketEnv)
			b.FillPercent = 0.9
			for range 20000 {
				binary.BigEndian.PutUint64(key[:], n)
				n++
				if err := b.Put(key[:], val); err != nil {
					return err
				}
				written += len(val) + len(key)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	rep, err := CheckFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CheckFile: %d MiB file, %d pages in use, %d walked, took %v", rep.Size>>20, rep.Pages, rep.Walked, rep.Took)
	start := time.Now()
	s, err = Open(path, Config{MaxBytes: int64(mib+256) << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Open (check and bbolt's own open): %v", time.Since(start))
	s.Close()
	fi, _ := os.Stat(path)
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = Open(path, Config{MaxBytes: int64(mib+256) << 20})
	t.Logf("Open of the same store cut in half: refused after %v: %v", time.Since(start), err)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatal("the half store was not refused")
	}
}

var (
	fuzzFixtureOnce sync.Once
	fuzzFixture     []byte
)

// FuzzOpenDamaged damages a real store (cut at a length, then bytes
// XORed at an offset) and opens it: an error wrapping ErrCorrupt or a
// store that reads, never a panic or a fault.
func FuzzOpenDamaged(f *testing.F) {
	fuzzFixtureOnce.Do(func() { fuzzFixture = damageFixture(f, 500) })
	good := fuzzFixture
	f.Add(uint32(len(good)), uint32(4096+16), []byte{0xff})
	f.Add(uint32(16<<10), uint32(0), []byte{})
	f.Add(uint32(len(good)), uint32(3*4096), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Fuzz(func(t *testing.T, cut, at uint32, xor []byte) {
		b := append([]byte(nil), good[:min(int(cut), len(good))]...)
		for i, x := range xor {
			if j := int(at) + i; j < len(b) {
				b[j] ^= x
			}
		}
		path := filepath.Join(t.TempDir(), "history.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		defer func() {
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("open and read took %v", took)
			}
		}()
		s, err := Open(path, Config{LockTimeout: time.Second})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v, want ErrCorrupt", err)
			}
			return
		}
		_, _ = s.Inbox(InboxFilter{})
		s.Close()
	})
}
