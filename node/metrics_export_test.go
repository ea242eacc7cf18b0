package node

import (
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/status"
)

func TestExportAccessors(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	tcpOnly := func(c *Config) { c.NoUnixListener = true } // the link stays on TCP
	a := m.startWith(0, tcpOnly)
	b := m.startWith(1, tcpOnly, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) && linked(b, m.ids[0].Pub) })

	if got := a.Backend().LinkCounts(); len(got) != 1 || got[status.LinkClass{Network: "tcp", Direction: "inbound"}] != 1 {
		t.Errorf("a links = %v, want one inbound tcp", got)
	}
	if got := b.Backend().LinkCounts(); len(got) != 1 || got[status.LinkClass{Network: "tcp", Direction: "outbound"}] != 1 {
		t.Errorf("b links = %v, want one outbound tcp", got)
	}

	qs := a.Backend().QueueDepths()
	if len(qs) != 3 || qs[0].Name != status.QueueRxCommit || qs[1].Name != status.QueueMirror || qs[2].Name != status.QueueLinkSend {
		t.Fatalf("queues = %+v", qs)
	}
	for _, q := range qs {
		if q.Cap <= 0 || q.Len < 0 || q.Len > q.Cap {
			t.Errorf("queue %+v", q)
		}
	}

	// Each node announces itself at start, so both see at least themselves.
	waitFor(t, 5*time.Second, "presence", func() bool { return a.Backend().PresenceCounts()["online"] >= 1 })
	for s := range a.Backend().PresenceCounts() {
		known := false
		for _, k := range status.PresenceStates() {
			known = known || k == s
		}
		if !known {
			t.Errorf("presence state %q not in PresenceStates %v", s, status.PresenceStates())
		}
	}

	before, err := b.Backend().HistoryStats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.out.Send(api.Send{To: "b", Body: "hi"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "stored", func() bool {
		st, err := b.Backend().HistoryStats()
		return err == nil && st.Envelopes == before.Envelopes+1 && st.FileSize > 0
	})

	if s := a.Backend().Started(); s.IsZero() || time.Since(s) < 0 || time.Since(s) > time.Minute {
		t.Errorf("started %v", s)
	}
}

// The accessors are safe to call while the node works and while it
// closes; the race detector checks the locking.
func TestExportAccessorsConcurrent(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	a := m.start(0)
	b := m.start(1, tcpAddr(t, a))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a.Backend().LinkCounts()
				a.Backend().QueueDepths()
				a.Backend().PresenceCounts()
				a.Backend().HistoryStats()
				a.Backend().Counters()
			}
		})
	}
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })
	for i := range 20 {
		if _, err := b.out.Send(api.Send{To: "a", Body: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	waitFor(t, 5*time.Second, "unlink", func() bool { return len(a.Backend().LinkCounts()) == 0 })
	close(stop)
	wg.Wait()
}
