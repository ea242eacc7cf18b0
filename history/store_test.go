package history

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

func TestPutGetRoundTrip(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	s, _ := openTest(t, Config{Now: clk.now})
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	ch := uuid.New()

	m := alice.msg(t, ch, t0.UnixMilli(), "hello channel")
	dm := alice.env(t, proto.ToPeer(bob.pub), t0.UnixMilli()+1, "hello bob")
	if added, err := s.Put(m, false); err != nil || !added {
		t.Fatalf("put channel message: added=%v err=%v", added, err)
	}
	if added, err := s.Put(dm, true); err != nil || !added {
		t.Fatalf("put dm: added=%v err=%v", added, err)
	}

	for _, tc := range []struct {
		se          *proto.SignedEnvelope
		fromHistory bool
	}{{m, false}, {dm, true}} {
		got, err := s.Get(tc.se.From, tc.se.ID)
		if err != nil {
			t.Fatalf("get %s: %v", tc.se.ID, err)
		}
		if !bytes.Equal(got.Raw, tc.se.Raw) {
			t.Errorf("get %s: raw bytes differ", tc.se.ID)
		}
		want := Meta{
			ID: tc.se.ID, From: tc.se.From, To: tc.se.To, Kind: tc.se.Kind, TS: tc.se.TS, TTL: tc.se.TTL,
			Seq: tc.se.Seq, Epoch: tc.se.Epoch, Received: t0, FromHistory: tc.fromHistory, Size: len(tc.se.Raw),
		}
		if !got.Received.Equal(want.Received) {
			t.Errorf("received = %v, want %v", got.Received, want.Received)
		}
		got.Received = want.Received
		if got.Meta != want {
			t.Errorf("meta = %+v\nwant %+v", got.Meta, want)
		}
		se, err := got.Envelope()
		if err != nil {
			t.Fatalf("parse stored envelope: %v", err)
		}
		if err := se.Verify(); err != nil {
			t.Errorf("stored envelope does not verify: %v", err)
		}
	}
	if _, err := s.Get(proto.PubKey{}, uuid.New()); !errors.Is(err, ErrNotFound) {
		t.Errorf("get unknown id: err = %v, want ErrNotFound", err)
	}
	st := mustStats(t, s)
	if st.Envelopes != 2 || st.Channels[ch] != 1 || st.Direct != 1 {
		t.Errorf("stats: envelopes=%d channels=%v direct=%d, want 2, 1, 1", st.Envelopes, st.Channels, st.Direct)
	}
}

func TestDedupe(t *testing.T) {
	t.Parallel()
	s, path := openTest(t, Config{})
	alice := newSender(t, "alice")
	ch := uuid.New()
	m := alice.msg(t, ch, t0.UnixMilli(), "once")

	if seen, err := s.Seen(m.From, m.ID); err != nil || seen {
		t.Fatalf("seen before put: %v, %v", seen, err)
	}
	if added, err := s.Put(m, false); err != nil || !added {
		t.Fatalf("first put: added=%v err=%v", added, err)
	}
	if added, err := s.Put(m, true); err != nil || added {
		t.Fatalf("second put: added=%v err=%v, want a duplicate", added, err)
	}
	if seen, err := s.Seen(m.From, m.ID); err != nil || !seen {
		t.Fatalf("seen after put: %v, %v", seen, err)
	}
	// Same id, other sender: another envelope, stored beside the first.
	mallory := newSender(t, "mallory")
	reused := *mallory.msg(t, ch, t0.UnixMilli(), "same id")
	reused.Envelope.ID = m.ID
	e := reused.Envelope
	rse, err := proto.SignEnvelope(mallory.key, &e)
	if err != nil {
		t.Fatal(err)
	}
	if added, err := s.Put(rse, false); err != nil || !added {
		t.Fatalf("put with another sender's id: added=%v err=%v, want added", added, err)
	}
	for _, want := range []*proto.SignedEnvelope{m, rse} {
		got, err := s.Get(want.From, want.ID)
		if err != nil || !bytes.Equal(got.Raw, want.Raw) {
			t.Fatalf("get %s from %s: %v", want.ID, want.From.Fingerprint(), err)
		}
	}
	if both, err := s.GetByID(m.ID); err != nil || len(both) != 2 {
		t.Fatalf("get by id: %d envelopes, %v; want 2", len(both), err)
	}
	// Duplicates within one batch.
	m2 := alice.msg(t, ch, t0.UnixMilli()+1, "twice in a batch")
	added, err := s.PutBatch([]*proto.SignedEnvelope{m2, m2, m}, false)
	if err != nil || !added[0] || added[1] || added[2] {
		t.Fatalf("batch with duplicates: added=%v err=%v", added, err)
	}
	if n := mustStats(t, s).Channels[ch]; n != 3 {
		t.Fatalf("channel holds %d envelopes, want 3", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// After reopening: from the warmed cache, and from disk with a cache
	// too small to hold both.
	for _, size := range []int{0, 1} {
		s := openAt(t, path, Config{SeenCacheSize: size})
		for _, se := range []*proto.SignedEnvelope{m, m2} {
			if seen, err := s.Seen(se.From, se.ID); err != nil || !seen {
				t.Errorf("cache %d: seen after reopen: %v, %v", size, seen, err)
			}
		}
		if added, err := s.Put(m, false); err != nil || added {
			t.Errorf("cache %d: put after reopen: added=%v err=%v", size, added, err)
		}
		s.Close()
	}
}

func TestGroupCommitBatches(t *testing.T) {
	s, _ := openTest(t, Config{})
	ch := uuid.New()
	const n = 1000
	envs := make([]*proto.SignedEnvelope, n)
	senders := []*sender{newSender(t, "a"), newSender(t, "b"), newSender(t, "c"), newSender(t, "d")}
	for i := range envs {
		envs[i] = senders[i%len(senders)].msg(t, ch, t0.UnixMilli()+int64(i), "burst")
	}
	before := mustStats(t, s).Commits
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, se := range envs {
		wg.Go(func() {
			if added, err := s.Put(se, false); err != nil || !added {
				errs <- errors.Join(err, errors.New("not added"))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := mustStats(t, s)
	commits := st.Commits - before
	t.Logf("%d concurrent puts: %d commits, %.1f envelopes per commit", n, commits, st.EnvelopesPerCommit)
	if commits > n/10 {
		t.Errorf("%d concurrent puts took %d commits, want at most %d", n, commits, n/10)
	}
	if st.Channels[ch] != n {
		t.Errorf("channel holds %d envelopes, want %d", st.Channels[ch], n)
	}

	// A lone sequential writer gets a commit per request and pays no
	// window: ten puts take well under ten windows... plus fsyncs.
	before = st.Commits
	for i := range 10 {
		mustPut(t, s, senders[0].msg(t, ch, t0.UnixMilli()+int64(n+i), "seq"))
	}
	if c := mustStats(t, s).Commits - before; c != 10 {
		t.Errorf("10 sequential puts took %d commits, want 10", c)
	}
}

func TestLockedStore(t *testing.T) {
	t.Parallel()
	s, path := openTest(t, Config{})
	start := time.Now()
	_, err := Open(path, Config{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "history store "+path+" is locked by another process") {
		t.Errorf("second open: error %q does not say the store is locked", err)
	}
	t.Logf("second open gave up after %v: %v", time.Since(start), err)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second open took %v", d)
	}
	s.Close()
	s2, err := Open(path, Config{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}

func TestQuota(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	s, path := openTest(t, Config{MaxBytes: limit})
	alice := newSender(t, "alice")
	ch := uuid.New()
	var quotaErr error
	stored := 0
	for i := 0; i < 1000; i += 4 {
		var batch []*proto.SignedEnvelope
		for j := range 4 {
			batch = append(batch, alice.msg(t, ch, t0.UnixMilli()+int64(i+j), body(8<<10)))
		}
		if _, err := s.PutBatch(batch, false); err != nil {
			quotaErr = err
			break
		}
		stored += len(batch)
	}
	if !errors.Is(quotaErr, ErrQuota) {
		t.Fatalf("after %d envelopes of 8 KiB: err = %v, want ErrQuota", stored, quotaErr)
	}
	if !strings.Contains(quotaErr.Error(), "past its limit of 1048576 bytes") {
		t.Errorf("quota error %q does not name the limit", quotaErr)
	}
	t.Logf("quota hit after %d envelopes: %v", stored, quotaErr)
	if fi, err := os.Stat(path); err != nil || fi.Size() > limit {
		t.Fatalf("file size %d exceeds the %d-byte quota (%v)", fi.Size(), limit, err)
	}
	// Deletes still work at the quota, and make room again.
	if _, err := s.Prune(ch, 0, 10, time.Now()); err != nil {
		t.Fatalf("prune at quota: %v", err)
	}
	if _, err := s.Put(alice.msg(t, ch, t0.UnixMilli()+5000, body(8<<10)), false); err != nil {
		t.Fatalf("put after pruning: %v", err)
	}
	checkDB(t, s)
}

func TestCloseDrainsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	baseline := runtime.NumGoroutine()
	path := filepath.Join(t.TempDir(), "h.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	alice := newSender(t, "alice")
	ch := uuid.New()
	envs := make([]*proto.SignedEnvelope, 200)
	for i := range envs {
		envs[i] = alice.msg(t, ch, t0.UnixMilli()+int64(i), "racing close")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked []uuid.UUID
	for _, se := range envs {
		wg.Go(func() {
			added, err := s.Put(se, false)
			switch {
			case err == nil && added:
				mu.Lock()
				acked = append(acked, se.ID)
				mu.Unlock()
			case errors.Is(err, ErrClosed):
			default:
				t.Errorf("put racing close: added=%v err=%v", added, err)
			}
		})
	}
	time.Sleep(time.Millisecond) // deliberate: let some puts in before the close races the rest
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	wg.Wait()
	if _, err := s.Put(envs[0], false); !errors.Is(err, ErrClosed) {
		t.Errorf("put after close: err = %v, want ErrClosed", err)
	}
	if _, err := s.Get(envs[0].From, envs[0].ID); !errors.Is(err, ErrClosed) {
		t.Errorf("get after close: err = %v, want ErrClosed", err)
	}
	s2 := openAt(t, path, Config{})
	for _, id := range acked {
		if _, err := getID(s2, id); err != nil {
			t.Errorf("acknowledged %s lost across close: %v", id, err)
		}
	}
	t.Logf("%d of %d puts acknowledged before close", len(acked), len(envs))
	s2.Close()
	testwait.Until(2*time.Second, func() bool { return runtime.NumGoroutine() <= baseline })
	if n := runtime.NumGoroutine(); n > baseline {
		t.Errorf("goroutines: %d after close, %d before open", n, baseline)
	}
}

func TestChannelMessages(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice := newSender(t, "alice")
	ch, other := uuid.New(), uuid.New()
	var ids []uuid.UUID
	for i := range 20 {
		se := alice.msg(t, ch, t0.UnixMilli()+int64(i)*1000, "m")
		ids = append(ids, se.ID)
		mustPut(t, s, se, alice.msg(t, other, t0.UnixMilli()+int64(i)*1000, "other"))
	}
	got, err := s.ChannelMessages(ch, time.Time{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("got %d messages, want 5", len(got))
	}
	for i, m := range got {
		if m.ID != ids[15+i] {
			t.Errorf("message %d = %s, want %s (newest five, oldest first)", i, m.ID, ids[15+i])
		}
	}
	got, err = s.ChannelMessages(ch, t0.Add(17*time.Second), 0)
	if err != nil || len(got) != 3 || got[0].ID != ids[17] {
		t.Fatalf("since 17 s: %d messages (%v), want 3 from %s", len(got), err, ids[17])
	}
	got, err = s.ChannelMessages(uuid.New(), time.Time{}, 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("unknown channel: %d messages, %v", len(got), err)
	}
}

// prunedStore opens a store that held 300 envelopes of 2 KB in channel ch
// of which retention kept the last 30, and returns all 300.
func prunedStore(t *testing.T) (s *Store, path string, ch uuid.UUID, all []*proto.SignedEnvelope) {
	t.Helper()
	s, path = openTest(t, Config{})
	alice := newSender(t, "alice")
	ch = uuid.New()
	for i := range 300 {
		all = append(all, alice.msg(t, ch, t0.UnixMilli()+int64(i), body(2000)))
	}
	for i := 0; i < len(all); i += 50 {
		mustPut(t, s, all[i:i+50]...)
	}
	if _, err := s.Prune(ch, 0, 30, t0); err != nil {
		t.Fatal(err)
	}
	return s, path, ch, all
}

func TestCompact(t *testing.T) {
	t.Parallel()
	s, path, ch, all := prunedStore(t)
	keep := all[270:]
	free, size, err := s.Reclaimable()
	if err != nil || size == 0 || free*2 < size {
		t.Fatalf("after pruning 90%%: Reclaimable = %d free of %d (%v), want at least half free", free, size, err)
	}
	dst := filepath.Join(filepath.Dir(path), "compact.db")
	if err := s.Compact(dst); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if err := s.Compact(dst); err == nil {
		t.Errorf("compact onto an existing file succeeded")
	}
	before := mustStats(t, s).FileSize
	c := openAt(t, dst, Config{})
	st := mustStats(t, c)
	t.Logf("compacted %d -> %d bytes", before, st.FileSize)
	if st.FileSize >= before {
		t.Errorf("compacted file is %d bytes, original %d", st.FileSize, before)
	}
	if st.Channels[ch] != 30 {
		t.Errorf("compacted copy holds %d envelopes, want 30", st.Channels[ch])
	}
	for _, se := range keep {
		got, err := c.Get(se.From, se.ID)
		if err != nil || !bytes.Equal(got.Raw, se.Raw) {
			t.Fatalf("compacted copy lost %s: %v", se.ID, err)
		}
	}
	checkDB(t, c)
	if free, size, err := c.Reclaimable(); err != nil || free*4 > size {
		t.Errorf("compacted copy: %d free of %d (%v)", free, size, err)
	}
}

func TestCompactFile(t *testing.T) {
	t.Parallel()
	s, path, _, all := prunedStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A copy left by an interrupted compaction is no obstacle.
	if err := os.WriteFile(path+".compact", []byte("half a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, after, err := CompactFile(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if after >= before || after <= 0 {
		t.Fatalf("CompactFile: %d -> %d bytes", before, after)
	}
	if _, err := os.Stat(path + ".compact"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary copy left behind: %v", err)
	}
	c := openAt(t, path, Config{})
	for _, se := range all[270:] {
		if got, err := c.Get(se.From, se.ID); err != nil || !bytes.Equal(got.Raw, se.Raw) {
			t.Fatalf("compacted store lost %s: %v", se.ID, err)
		}
	}
	// The dedupe set outlives pruned envelopes: a replay is still refused.
	if added, err := c.Put(all[0], false); err != nil || added {
		t.Fatalf("replay of a pruned envelope after compaction: added %v, %v", added, err)
	}
	checkDB(t, c)
	// A locked store is not compacted.
	if _, _, err := CompactFile(path, Config{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("CompactFile of an open store: %v, want ErrLocked", err)
	}
}

func TestOpenCorrupt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xab}, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Config{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open garbage: err = %v, want ErrCorrupt", err)
	}
}
