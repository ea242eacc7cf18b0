package mailbox

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// TestBoxOverHost drives a Box through its Host alone: opened under one
// root, started, it writes a queued delivery's file; stopped, it closes
// the mirror and the outbox together.
func TestBoxOverHost(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mailbox")
	h := newFakeHost()
	b, err := OpenBox(root, DefaultConfig(), LoopConfig{Host: h}, DefaultOutboxConfig())
	if err != nil {
		t.Fatal(err)
	}
	if b.Loop == nil || b.Mirror.Dir() == "" {
		t.Fatalf("box %+v", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Start(ctx, wg.Go, func(*OutgoingMessage) (Result, error) { return Result{}, nil }, slog.New(slog.DiscardHandler))
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stop)

	waitUntil(t, "the start's reconcile", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.listed > 0 })
	now := time.Now()
	se := sign(t, alice, 1, proto.ToPeer(pub(bob)), msg("dm 0", nil))
	h.deliver(se, now)
	b.Loop.Queue(ctx, testDelivery{h.InboxItem(se, history.PriorityNormal, false, now)})
	waitUntil(t, "the file", func() bool { return len(inboxFiles(t, root)) == 1 })

	stop()
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestOpenBoxFails checks that a root that cannot be a folder is refused,
// with the mailbox named.
func TestOpenBoxFails(t *testing.T) {
	root := filepath.Join(t.TempDir(), "mailbox")
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenBox(root, DefaultConfig(), LoopConfig{Host: newFakeHost()}, DefaultOutboxConfig())
	if err == nil || !strings.HasPrefix(err.Error(), "mailbox: ") {
		t.Fatalf("open over a file: %v", err)
	}
}
