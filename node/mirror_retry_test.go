package node

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/proto"
)

// retryRun is a mirror run on b whose file writes fail while *full, as
// on a full disk, driven by the test rather than b's mirror loop. The DMs
// it returns are in b's store and inbox, delivered now, and were never
// queued, so b's own loop never touches them.
func retryRun(t *testing.T, dms int) (m *testMesh, b *Node, r *mirrorRun, items []mailbox.Item, full *bool) {
	t.Helper()
	m = newTestMesh(t, 2)
	m.writeRoster(1, m.roster)
	b = m.startWith(1, func(c *Config) { c.MailboxMinFree = -1 })
	var ds []history.Delivery
	for i := range dms {
		se, err := proto.SignEnvelope(m.ids[0].Key, &proto.Envelope{ID: proto.NewID(), From: m.ids[0].Pub,
			To: proto.ToPeer(m.ids[1].Pub), Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300,
			Seq: uint64(i + 1), Epoch: proto.NewEpoch(), Message: &proto.Message{Body: fmt.Sprintf("dm %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, history.Delivery{Env: se, Inbox: true, Priority: history.PriorityNormal})
		items = append(items, b.mirrorItem(se, history.PriorityNormal, false, time.Now()))
	}
	if _, err := b.store.Deliver(ds); err != nil {
		t.Fatal(err)
	}
	full = new(bool)
	*full = true
	r = &mirrorRun{n: b, files: func(rewrite bool, its ...mailbox.Item) ([]string, error) {
		if *full {
			return nil, fmt.Errorf("write: %w", mailbox.ErrDiskFull)
		}
		if rewrite {
			return b.mirror.Rewrite(its...)
		}
		return b.mirror.Write(its...)
	}}
	t.Cleanup(func() {
		if r.retry != nil {
			r.retry.Stop()
		}
	})
	return m, b, r, items, full
}

// TestMirrorRetryAfterFailedRetryWritesEveryFile: a retry whose own
// writes fail must not count those items as written. The next retry,
// with room again, writes every missing file before it declares the
// mirror healthy. (The old code put the failed items on the queue's skip
// list and its next retry dropped them: files lost, success logged.)
func TestMirrorRetryAfterFailedRetryWritesEveryFile(t *testing.T) {
	const dms = 5
	m, b, r, items, full := retryRun(t, dms)

	// The queue's batch fails: the retries start.
	r.write(items, false)
	if !r.failing || r.failures != 1 {
		t.Fatalf("after a failed batch: failing %v failures %d", r.failing, r.failures)
	}
	// A retry while the disk is still full writes nothing and stays failing.
	r.retryMissing()
	if !r.failing || r.failures != 2 {
		t.Fatalf("after a failed retry: failing %v failures %d", r.failing, r.failures)
	}
	if len(r.skip) != 0 {
		t.Errorf("a failed retry put %d items on the skip list", len(r.skip))
	}
	if n := len(mailboxFiles(t, m.home(1))); n != 0 {
		t.Fatalf("%d files on a full disk", n)
	}
	// Room again: the next retry writes every file, then says healthy.
	*full = false
	r.retryMissing()
	files := mailboxFiles(t, m.home(1))
	if len(files) != dms {
		t.Fatalf("after the retry with room: %d files, want %d (failing %v, counters %v)", len(files), dms, r.failing, b.Counters())
	}
	if r.failing {
		t.Error("still failing with every file written")
	}
	assertOneFileEach(t, files, dms)
}

// TestMirrorRetryDeclaresHealthyOnlyWhenWritten: a retry whose writes
// fail part-way keeps retrying; the items whose files it wrote are not
// written twice, and the others are written by the next retry.
func TestMirrorRetryDeclaresHealthyOnlyWhenWritten(t *testing.T) {
	const dms = 6
	m, _, r, items, full := retryRun(t, dms)
	r.write(items, false)
	// Room for some files: the mirror writes the first three, then fails.
	*full = false
	inner := r.files
	r.files = func(rewrite bool, its ...mailbox.Item) ([]string, error) {
		if len(its) > 3 {
			paths, _ := inner(rewrite, its[:3]...)
			return paths, fmt.Errorf("write: %w", mailbox.ErrDiskFull)
		}
		return inner(rewrite, its...)
	}
	r.retryMissing()
	if !r.failing {
		t.Fatal("a retry that wrote 3 of 6 files declared the mirror healthy")
	}
	if n := len(mailboxFiles(t, m.home(1))); n != 3 {
		t.Fatalf("%d files after the partial retry, want 3", n)
	}
	r.files = inner
	r.retryMissing()
	if r.failing {
		t.Error("still failing with every file written")
	}
	assertOneFileEach(t, mailboxFiles(t, m.home(1)), dms)
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
