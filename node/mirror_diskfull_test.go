package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/transport"
)

// TestMirrorResumesAfterDiskFull fills a small tmpfs that holds b's
// mailbox, has a send b DMs while it is full, frees the space, and
// checks that every DM gets its mailbox file without a restart, that the
// failure is counted, and that it is logged once (root only: it mounts).
func TestMirrorResumesAfterDiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	m, a, b := linkedPair(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(m.home(1), "mailbox")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	logs := &countingHandler{Handler: testLogger(t).Handler(), mu: new(sync.Mutex), counts: map[string]int{}}
	cfg := DefaultConfig()
	cfg.Home = m.home(1)
	cfg.MDNS = false
	cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
	cfg.Seeds = []transport.Addr{tcpAddr(t, a)}
	cfg.Logger = slog.New(logs)
	cfg.MailboxMinFree = -1 // the 1 MiB file system is under any watermark: test the write failures
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // before the unmount
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })

	// Fill the file system: a filler file until ENOSPC.
	filler := filepath.Join(mnt, ".filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	const dms = 60
	for i := range dms {
		if _, err := a.out.Send(api.Send{To: "b", Body: fmt.Sprintf("while full %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "disk full counted", func() bool { return b.Backend().Counters()["mirror.disk_full"] > 0 })
	if n := len(mailboxFiles(t, m.home(1))); n >= dms {
		t.Fatalf("%d files written on a full disk", n)
	}
	// Every DM is in the store.
	waitFor(t, 10*time.Second, "DMs stored", func() bool {
		items, err := b.store.Inbox(history.InboxFilter{})
		return err == nil && len(items) == dms
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// More DMs while the retries run: each still gets one file.
	const more = 20
	for i := range more {
		if _, err := a.out.Send(api.Send{To: "b", Body: fmt.Sprintf("while full %d", dms+i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 40*time.Second, "every DM stored", func() bool {
		items, err := b.store.Inbox(history.InboxFilter{})
		return err == nil && len(items) == dms+more
	})
	// No restart: the retries write the missing files.
	if !testwait.Until(40*time.Second, func() bool { return len(mailboxFiles(t, m.home(1))) >= dms+more }) {
		items, err := b.store.Inbox(history.InboxFilter{})
		t.Fatalf("after 40s: %d files, %d inbox items (%v), counters %v", len(mailboxFiles(t, m.home(1))), len(items), err, b.Backend().Counters())
	}
	// The retries end with a pass that writes every missing file and
	// says so; no retry runs after it, so none can write a duplicate.
	waitFor(t, 40*time.Second, "the mirror's recovery line", func() bool {
		return logs.count("mailbox mirror: writing files again; the files that failed are written") >= 1
	})
	files := mailboxFiles(t, m.home(1))
	got := map[string]int{}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range dms + more {
			if strings.Contains(string(data), fmt.Sprintf("while full %d\n", i)) {
				got[fmt.Sprint(i)]++
			}
		}
	}
	if len(got) != dms+more || len(files) != dms+more {
		t.Fatalf("%d files for %d distinct DMs, want %d of each", len(files), len(got), dms+more)
	}
	// One line when the files start to fail, one when they are written,
	// however many files and retries in between.
	if got := logs.count("mailbox mirror: disk full; retrying with backoff until the missing files are written"); got != 1 {
		t.Errorf("the disk-full error was logged %d times, want once", got)
	}
	if got := logs.count("mailbox mirror: writing files again; the files that failed are written"); got != 1 {
		t.Errorf("the recovery was logged %d times, want once", got)
	}
	c := b.Backend().Counters()
	if c["mirror.files_failed"] == 0 || c["mirror.retries"] == 0 {
		t.Errorf("counters: files_failed %d retries %d", c["mirror.files_failed"], c["mirror.retries"])
	}
	// Later DMs are mirrored as usual.
	if _, err := a.out.Send(api.Send{To: "b", Body: "after"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "later DM mirrored", func() bool { return len(mailboxFiles(t, m.home(1))) == dms+more+1 })
}

// countingHandler counts the records it passes on, by message.
type countingHandler struct {
	slog.Handler
	mu     *sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), mu: h.mu, counts: h.counts}
}

func (h *countingHandler) WithGroup(g string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(g), mu: h.mu, counts: h.counts}
}

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}
