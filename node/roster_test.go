package node

import (
	"sync"
	"testing"

	"github.com/meshd/meshd/node/home"
)

// TestConcurrentRosterAppliesPersistNewest applies pairs of increasing
// roster versions at once, as two links gossiping v3 and v4 do. Whatever
// the interleaving, the roster file must end as the newest version applied.
func TestConcurrentRosterAppliesPersistNewest(t *testing.T) {
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	a := m.start(0)
	h := home.Home{Dir: m.home(0)}
	cur := m.roster
	for round := range 100 {
		// Two updates of cur, versions v+1 and v+2, each signed by the admin.
		var docs [][]byte
		for k := range 2 {
			next := cur.Next()
			next.Version += uint64(k)
			if err := next.Sign(m.ids[0].Key); err != nil {
				t.Fatal(err)
			}
			b, err := next.Encode()
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, b)
			if k == 1 {
				cur = next
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, b := range docs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _ = a.roster.PublishRoster(b) // the older one may be refused as a rollback
			}()
		}
		close(start)
		wg.Wait()
		if got := a.Roster().Version; got != cur.Version {
			t.Fatalf("round %d: in memory v%d, want v%d", round, got, cur.Version)
		}
		onDisk, err := h.LoadRoster()
		if err != nil {
			t.Fatal(err)
		}
		if onDisk.Version != cur.Version {
			t.Fatalf("round %d: roster file holds v%d after v%d was applied", round, onDisk.Version, cur.Version)
		}
	}
}
