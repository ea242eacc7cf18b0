package node

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/mailbox"
	"github.com/meshd/meshd/transport"
)

// TestMirrorWatermarkPausesAndResumes: b's mailbox file system reports
// less free space than its watermark, so DMs to b are stored but get no
// file, and the mirror says so once; when the space comes back it
// resumes without a restart and writes every file it held back, once.
func TestMirrorWatermarkPausesAndResumes(t *testing.T) {
	var free atomic.Int64
	free.Store(10 << 20)
	old := diskSpace
	diskSpace = func(string) (uint64, uint64, error) { return uint64(free.Load()), 100 << 30, nil }
	t.Cleanup(func() { diskSpace = old })

	m, a, b := linkedPair(t)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &countingHandler{Handler: testLogger(t).Handler(), mu: new(sync.Mutex), counts: map[string]int{}}
	cfg := DefaultConfig()
	cfg.Home = m.home(1)
	cfg.MDNS = false
	cfg.Listen = []transport.Addr{{Network: "tcp", Address: "127.0.0.1:0"}}
	cfg.Seeds = []transport.Addr{tcpAddr(t, a)}
	cfg.Logger = slog.New(logs)
	cfg.MailboxMinFree = 64 << 20
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })

	const dms = 30
	for i := range dms {
		if _, err := a.out.Send(api.Send{To: "b", Body: fmt.Sprintf("low %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "DMs stored", func() bool {
		items, err := b.store.Inbox(history.InboxFilter{})
		return err == nil && len(items) == dms
	})
	waitFor(t, 10*time.Second, "the pause", func() bool { return b.Backend().StatusInfo().Mailbox.Paused == mailbox.PauseFree })
	if n := len(mailboxFiles(t, m.home(1))); n != 0 {
		t.Fatalf("%d files written below the watermark", n)
	}
	free.Store(1 << 30)
	waitFor(t, 10*time.Second, "the files held back", func() bool { return len(mailboxFiles(t, m.home(1))) == dms })
	waitFor(t, 5*time.Second, "the resume", func() bool { return b.Backend().StatusInfo().Mailbox.Paused == "" })
	// The loop counts a batch's files once the batch is written: the files
	// can be on disk a moment before the count has them.
	waitFor(t, 5*time.Second, "the files counted", func() bool { return b.Backend().StatusInfo().Mailbox.Files == dms })
	if st := b.Backend().StatusInfo().Mailbox; st.Files != dms || st.FreeBytes != 1<<30 {
		t.Errorf("status after the resume: %+v, want %d files and 1 GiB free", st, dms)
	}
	if got := logs.count("mailbox mirror paused: free disk space is below mailbox_min_free_mib; the envelopes stay in the store and their files are written once there is room"); got != 1 {
		t.Errorf("the pause was logged %d times, want once", got)
	}
	if got := logs.count("mailbox mirror resumed: there is room again; writing the files it held back"); got != 1 {
		t.Errorf("the resume was logged %d times, want once", got)
	}
	if c := b.Backend().Counters(); c["mirror.paused.free_space"] != 1 || c["mirror.held_back"] == 0 {
		t.Errorf("counters: paused %d, held back %d", c["mirror.paused.free_space"], c["mirror.held_back"])
	}
}
