package mailbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

// fakeHost is a store in memory: the inbox items and envelopes a test
// gives it, and the counters the loop counts.
type fakeHost struct {
	mu     sync.Mutex
	inbox  []history.InboxItem
	envs   map[itemKey]*proto.SignedEnvelope
	counts map[Count]uint64
	pauses map[string]int
	listed int // calls of Inbox: the start's reconcile is one
}

func newFakeHost() *fakeHost {
	return &fakeHost{envs: map[itemKey]*proto.SignedEnvelope{}, counts: map[Count]uint64{}, pauses: map[string]int{}}
}

// deliver puts se in the inbox, delivered at.
func (h *fakeHost) deliver(se *proto.SignedEnvelope, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.envs[itemKey{se.From, se.ID}] = se
	h.inbox = append(h.inbox, history.InboxItem{Meta: history.Meta{ID: se.ID, From: se.From},
		Priority: history.PriorityNormal, Delivered: at})
}

func (h *fakeHost) Inbox(since time.Time) ([]history.InboxItem, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listed++
	var out []history.InboxItem
	for _, it := range h.inbox {
		if !it.Delivered.Before(since) {
			out = append(out, it)
		}
	}
	return out, nil
}

func (h *fakeHost) InboxEntry(from proto.PubKey, id uuid.UUID) (history.InboxItem, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range h.inbox {
		if it.From.Equal(from) && it.ID == id {
			return it, nil
		}
	}
	return history.InboxItem{}, os.ErrNotExist
}

func (h *fakeHost) InboxRead(keys []history.ItemKey) ([]bool, error) {
	read := make([]bool, len(keys))
	for i, k := range keys {
		it, err := h.InboxEntry(k.From, k.ID)
		read[i] = err == nil && it.Read
	}
	return read, nil
}

func (h *fakeHost) Envelope(from proto.PubKey, id uuid.UUID) (*proto.SignedEnvelope, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if se, ok := h.envs[itemKey{from, id}]; ok {
		return se, nil
	}
	return nil, os.ErrNotExist
}

func (h *fakeHost) Sent() ([]history.DeliveryRecord, error) { return nil, nil }

func (h *fakeHost) InboxItem(se *proto.SignedEnvelope, prio history.Priority, fromHistory bool, at time.Time) Item {
	return Item{Env: se, Priority: prio.String(), FromHistory: fromHistory, Delivered: at}
}

func (h *fakeHost) SentItem(se *proto.SignedEnvelope) Item {
	return Item{Env: se, Delivered: se.Time(), Folder: FolderSent}
}

func (h *fakeHost) Count(c Count, n uint64) {
	h.mu.Lock()
	h.counts[c] += n
	h.mu.Unlock()
}

func (h *fakeHost) Paused(reason string) {
	h.mu.Lock()
	h.pauses[reason]++
	h.mu.Unlock()
}

// retryLoop is a mirror loop whose file writes fail while *full, as on a
// full disk, driven by the test rather than by Run. The DMs it returns
// are in its host's inbox, delivered now.
func retryLoop(t *testing.T, dms int) (l *Loop, root string, items []Item, full *bool) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "mailbox")
	m, err := Open(root, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h := newFakeHost()
	now := time.Now()
	for i := range dms {
		se := sign(t, alice, i+1, proto.ToPeer(pub(bob)), msg(fmt.Sprintf("dm %d", i), nil))
		h.deliver(se, now)
		items = append(items, h.InboxItem(se, history.PriorityNormal, false, now))
	}
	full = new(bool)
	*full = true
	l = NewLoop(LoopConfig{Root: root, Mirror: m, Host: h, files: func(rewrite bool, its ...Item) ([]string, error) {
		if *full {
			return nil, fmt.Errorf("write: %w", ErrDiskFull)
		}
		if rewrite {
			return m.Rewrite(its...)
		}
		return m.Write(its...)
	}})
	t.Cleanup(func() {
		if l.retry != nil {
			l.retry.Stop()
		}
	})
	return l, root, items, full
}

// inboxFiles lists the inbox files of the mailbox at root.
func inboxFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", FolderInbox, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLoopRetryAfterFailedRetryWritesEveryFile: a retry whose own writes
// fail must not count those items as written. The next retry, with room
// again, writes every missing file before it declares the mirror
// healthy. (An older loop put the failed items on the queue's skip list
// and its next retry dropped them: files lost, success logged.)
func TestLoopRetryAfterFailedRetryWritesEveryFile(t *testing.T) {
	const dms = 5
	l, root, items, full := retryLoop(t, dms)

	// The queue's batch fails: the retries start.
	l.write(items, false)
	if !l.failing || l.failures != 1 {
		t.Fatalf("after a failed batch: failing %v failures %d", l.failing, l.failures)
	}
	// A retry while the disk is still full writes nothing and stays failing.
	l.retryMissing()
	if !l.failing || l.failures != 2 {
		t.Fatalf("after a failed retry: failing %v failures %d", l.failing, l.failures)
	}
	if len(l.skip) != 0 {
		t.Errorf("a failed retry put %d items on the skip list", len(l.skip))
	}
	if n := len(inboxFiles(t, root)); n != 0 {
		t.Fatalf("%d files on a full disk", n)
	}
	// Room again: the next retry writes every file, then says healthy.
	*full = false
	l.retryMissing()
	files := inboxFiles(t, root)
	if len(files) != dms {
		t.Fatalf("after the retry with room: %d files, want %d (failing %v)", len(files), dms, l.failing)
	}
	if l.failing {
		t.Error("still failing with every file written")
	}
	assertOneFileEach(t, files, dms)
}

// TestLoopRetryDeclaresHealthyOnlyWhenWritten: a retry whose writes fail
// part-way keeps retrying; the items whose files it wrote are not written
// twice, and the others are written by the next retry.
func TestLoopRetryDeclaresHealthyOnlyWhenWritten(t *testing.T) {
	const dms = 6
	l, root, items, full := retryLoop(t, dms)
	l.write(items, false)
	// Room for some files: the mirror writes the first three, then fails.
	*full = false
	inner := l.cfg.files
	l.cfg.files = func(rewrite bool, its ...Item) ([]string, error) {
		if len(its) > 3 {
			paths, _ := inner(rewrite, its[:3]...)
			return paths, fmt.Errorf("write: %w", ErrDiskFull)
		}
		return inner(rewrite, its...)
	}
	l.retryMissing()
	if !l.failing {
		t.Fatal("a retry that wrote 3 of 6 files declared the mirror healthy")
	}
	if n := len(inboxFiles(t, root)); n != 3 {
		t.Fatalf("%d files after the partial retry, want 3", n)
	}
	l.cfg.files = inner
	l.retryMissing()
	if l.failing {
		t.Error("still failing with every file written")
	}
	assertOneFileEach(t, inboxFiles(t, root), dms)
}

// TestLoopRunWritesQueuedAndReadItems drives Run through the host
// interface alone: a queued item gets its file and a checkpoint, an item
// marked read moves to read/, and the counts reach the host.
func TestLoopRunWritesQueuedAndReadItems(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mailbox")
	m, err := Open(root, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h := newFakeHost()
	l := NewLoop(LoopConfig{Root: root, Mirror: m, Host: h})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The start's reconcile lists the inbox first; an item delivered
	// before that would be written by it and by the queue alike.
	waitUntil(t, "the start's reconcile", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.listed > 0 })
	now := time.Now()
	se := sign(t, alice, 1, proto.ToPeer(pub(bob)), msg("dm 0", nil))
	h.deliver(se, now)
	l.Queue(ctx, testDelivery{h.InboxItem(se, history.PriorityNormal, false, now)})
	waitUntil(t, "the file", func() bool { return len(inboxFiles(t, root)) == 1 })
	waitUntil(t, "the checkpoint", func() bool { return !ReadCheckpoint(root).IsZero() })

	h.mu.Lock()
	h.inbox[0].Read = true
	h.mu.Unlock()
	l.Read(ctx, se.From, se.ID)
	waitUntil(t, "the move to read/", func() bool {
		read, _ := filepath.Glob(filepath.Join(root, "*", FolderRead, "*.txt"))
		return len(read) == 1 && len(inboxFiles(t, root)) == 0
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[CountFiles] != 1 || h.counts[CountMovedRead] != 1 || h.counts[CountCheckpoints] == 0 {
		t.Errorf("counts %v", h.counts)
	}
}

// TestLoopWritesReadItemsToRead: items of one batch that were marked
// read before the loop wrote them go straight to read/, the others to
// inbox/, and the host is asked once for the batch.
func TestLoopWritesReadItemsToRead(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mailbox")
	m, err := Open(root, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h := &countingHost{fakeHost: newFakeHost()}
	l := NewLoop(LoopConfig{Root: root, Mirror: m, Host: h})
	now := time.Now()
	var batch []Item
	for i := range 4 {
		se := sign(t, alice, i+1, proto.ToPeer(pub(bob)), msg(fmt.Sprintf("dm %d", i), nil))
		h.deliver(se, now)
		batch = append(batch, h.InboxItem(se, history.PriorityNormal, false, now))
	}
	h.mu.Lock()
	h.inbox[1].Read, h.inbox[2].Read = true, true
	h.mu.Unlock()
	l.write(batch, false)
	read, _ := filepath.Glob(filepath.Join(root, "*", FolderRead, "*.txt"))
	if len(read) != 2 || len(inboxFiles(t, root)) != 2 {
		t.Fatalf("%d files in read/ and %d in inbox/, want 2 and 2", len(read), len(inboxFiles(t, root)))
	}
	for _, p := range read {
		data, _ := os.ReadFile(p)
		if !strings.Contains(string(data), "dm 1\n") && !strings.Contains(string(data), "dm 2\n") {
			t.Errorf("%s in read/ is not a read item:\n%s", p, data)
		}
	}
	if h.lookups != 1 {
		t.Errorf("%d read-state lookups for one batch, want 1", h.lookups)
	}
}

// countingHost counts the read-state lookups of the loop.
type countingHost struct {
	*fakeHost
	lookups int
}

func (h *countingHost) InboxRead(keys []history.ItemKey) ([]bool, error) {
	h.lookups++
	return h.fakeHost.InboxRead(keys)
}

type testDelivery struct{ it Item }

func (d testDelivery) Envelope() *proto.SignedEnvelope { return d.it.Env }
func (d testDelivery) MailboxItem() Item               { return d.it }

// waitUntil waits up to 5 seconds for cond.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, what, cond)
}

// assertOneFileEach checks that files hold "dm 0" … "dm <dms-1>", one each.
func assertOneFileEach(t *testing.T, files []string, dms int) {
	t.Helper()
	got := map[string]int{}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range dms {
			if strings.Contains(string(data), fmt.Sprintf("dm %d\n", i)) {
				got[fmt.Sprint(i)]++
			}
		}
	}
	if len(got) != dms || len(files) != dms {
		t.Fatalf("%d files for %d distinct DMs, want %d of each", len(files), len(got), dms)
	}
}

// TestLoopStartWritesAnItemOnce: an item committed while the loop starts
// is in the store and in the queue; the start's reconcile writes its file
// and the queue's copy is skipped, so the item has one file, not two.
func TestLoopStartWritesAnItemOnce(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mailbox")
	m, err := Open(root, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h := newFakeHost()
	l := NewLoop(LoopConfig{Root: root, Mirror: m, Host: h})
	ctx, cancel := context.WithCancel(context.Background())
	se := sign(t, alice, 1, proto.ToPeer(pub(bob)), msg("dm 0", nil))
	now := time.Now()
	h.deliver(se, now)
	l.Queue(ctx, testDelivery{h.InboxItem(se, history.PriorityNormal, false, now)})
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	waitUntil(t, "the queue taken", func() bool { n, _ := l.Queued(); return n == 0 })
	cancel()
	<-done
	if files := inboxFiles(t, root); len(files) != 1 {
		t.Fatalf("%d files for one item: %v", len(files), files)
	}
	if h.counts[CountReconciled] != 1 {
		t.Fatalf("counts %v: the start's reconcile did not write the item", h.counts)
	}
}

// TestCheckpointWaitsForBulk: while a large file is being written to the
// file system (LoopConfig.Bulk), a due checkpoint waits, since its syncfs
// would write that file back too; it runs once the bulk write ends, and
// after maxCheckpointHold however long the bulk write goes on.
func TestCheckpointWaitsForBulk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "mailbox")
		m, err := Open(root, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		h := newFakeHost()
		var bulk atomic.Bool
		bulk.Store(true)
		l := NewLoop(LoopConfig{Root: root, Mirror: m, Host: h, Bulk: bulk.Load})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx) }()
		defer func() { cancel(); <-done }()
		checkpoints := func() uint64 {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.counts[CountCheckpoints]
		}
		deliver := func(body string) {
			synctest.Wait()
			now := time.Now()
			se := sign(t, alice, 1, proto.ToPeer(pub(bob)), msg(body, nil))
			h.deliver(se, now)
			l.Queue(ctx, testDelivery{h.InboxItem(se, history.PriorityNormal, false, now)})
			synctest.Wait()
		}

		deliver("dm 0")
		time.Sleep(10 * syncInterval)
		synctest.Wait()
		if n := checkpoints(); n != 0 {
			t.Fatalf("%d checkpoints during the bulk write, want 0", n)
		}
		bulk.Store(false)
		time.Sleep(syncInterval)
		synctest.Wait()
		if n := checkpoints(); n != 1 {
			t.Fatalf("%d checkpoints a second after the bulk write ended, want 1", n)
		}

		bulk.Store(true)
		deliver("dm 1")
		time.Sleep(maxCheckpointHold)
		synctest.Wait()
		if n := checkpoints(); n != 1 {
			t.Fatalf("%d checkpoints before the hold's bound, want 1", n)
		}
		time.Sleep(2 * syncInterval)
		synctest.Wait()
		if n := checkpoints(); n != 2 {
			t.Fatalf("%d checkpoints after the hold's bound with the bulk write going on, want 2", n)
		}
	})
}
