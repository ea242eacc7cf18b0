package node

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/transport"
)

// TestStoreFailureLoggedOnce: while the history store refuses every
// commit (as on a full disk), each envelope is counted as dropped but
// the error is logged once per interval, not once per message.
func TestStoreFailureLoggedOnce(t *testing.T) {
	t.Parallel()
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
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })
	// The store fails every commit from now on.
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	const dms = 20
	for i := range dms {
		if _, err := a.out.Send(api.Send{To: "b", Body: fmt.Sprintf("refused %d", i)}); err != nil {
			t.Fatal(err)
		}
		// One envelope a commit: wait for each to be refused.
		waitFor(t, 5*time.Second, "store failure counted", func() bool { return b.Backend().Counters()["drop.store_failed"] > uint64(i) })
	}
	if got := logs.count("store envelopes"); got != 1 {
		t.Fatalf("the store failure was logged %d times for %d failed commits, want once", got, b.Backend().Counters()["drop.store_failed"])
	}
}
