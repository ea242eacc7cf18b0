package node

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// retentionChannel creates and applies, on admin node n, a channel whose
// policy keeps hours hours or msgs messages (0: the default).
func retentionChannel(t *testing.T, n *Node, name string, hours, msgs uint32) *channel.Policy {
	t.Helper()
	p, err := channel.New("acme", name, nil, nil, true, n.id.Key)
	if err != nil {
		t.Fatal(err)
	}
	p.RetentionHours, p.RetentionMessages = hours, msgs
	if err := p.Sign(n.id.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := n.chans.Apply(p, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// putOld stores count envelopes from key to d with ts at, as if received.
func putOld(t *testing.T, n *Node, key ed25519.PrivateKey, d proto.Destination, at time.Time, count int, epoch uuid.UUID, firstSeq uint64) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for i := 0; i < count; i++ {
		e := &proto.Envelope{
			ID: proto.NewID(), From: proto.PubKeyOf(key), To: d, Kind: proto.KindMessage,
			TS: at.Add(time.Duration(i) * time.Millisecond).UnixMilli(), TTL: 300,
			Seq: firstSeq + uint64(i), Epoch: epoch,
			Message: &proto.Message{Body: fmt.Sprintf("m%d", i)},
		}
		se, err := proto.SignEnvelope(key, e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.store.Put(se, true); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, se.ID)
	}
	return ids
}

// TestRetentionByAgeAndCount prunes a channel by count (the newest kept),
// another by age, DMs by DirectRetention and expired queue entries; an
// archive node keeps what an ordinary node prunes, up to its own limits.
func TestRetentionByAgeAndCount(t *testing.T) {
	t.Parallel()
	now := time.Now()
	run := func(t *testing.T, archive bool) (*Node, *channel.Policy, *channel.Policy, []uuid.UUID, pruneReport) {
		var arch []int
		if archive {
			arch = []int{0}
		}
		m := newSyncMesh(t, 2, arch...)
		if _, ok := m.roster.Member(m.ids[0].Pub); !ok || a0archive(m) != archive {
			t.Fatal("roster archive flag not set as asked")
		}
		a := m.startWith(0, func(c *Config) { c.RetentionInterval = time.Hour; c.ArchiveRetention = 30 * 24 * time.Hour })
		counted := retentionChannel(t, a, "counted", 0, 50) // 72 h or 50 messages
		aged := retentionChannel(t, a, "aged", 1, 0)        // 1 h or 10,000 messages
		b := m.ids[1].Key
		ep := proto.NewEpoch()
		countedIDs := putOld(t, a, b, proto.ToChannel(counted.ID), now.Add(-time.Minute), 120, ep, 1)
		putOld(t, a, b, proto.ToChannel(aged.ID), now.Add(-2*time.Hour), 30, ep, 1)
		putOld(t, a, b, proto.ToChannel(aged.ID), now.Add(-40*24*time.Hour), 5, proto.NewEpoch(), 1)
		putOld(t, a, b, proto.ToChannel(aged.ID), now.Add(-time.Minute), 20, ep, 31)
		putOld(t, a, b, proto.ToPeer(a.Identity()), now.Add(-100*time.Hour), 3, ep, 1)
		putOld(t, a, b, proto.ToPeer(a.Identity()), now.Add(-time.Hour), 2, ep, 4)
		// A queued DM for b whose ttl has passed.
		se, err := a.out.Sign(proto.ToPeer(m.ids[1].Pub), proto.KindMessage, time.Second, func(e *proto.Envelope) {
			e.Message = &proto.Message{Body: "kept for b"}
			e.TS = now.Add(-time.Minute).UnixMilli()
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.store.Enqueue(m.ids[1].Pub, se); err != nil {
			t.Fatal(err)
		}
		return a, counted, aged, countedIDs, a.pruneOnce(now)
	}

	t.Run("ordinary node", func(t *testing.T) {
		a, counted, aged, ids, rep := run(t, false)
		if got := channelCount(a, counted.ID); got != 50 {
			t.Fatalf("#counted keeps %d, want 50", got)
		}
		kept := channelIDs(t, a, counted.ID)
		for i, id := range ids {
			if kept[id] != (i >= 70) {
				t.Fatalf("#counted message %d kept=%v; the newest 50 stay", i, kept[id])
			}
		}
		if got := channelCount(a, aged.ID); got != 20 {
			t.Fatalf("#aged keeps %d, want the 20 recent ones", got)
		}
		st, _ := a.store.Stats()
		// The expired queue entry is now our own delivery_failed item.
		if st.Direct != 3 || len(st.Queues) != 0 {
			t.Fatalf("direct %d (want 2, and the expired DM as a delivery_failed item), queues %v (want none)", st.Direct, st.Queues)
		}
		// The node's own first pass, 5 s after its start, falls inside
		// the setup on a loaded host: count what both passes removed.
		if g := a.metrics.Get; g("retention.pruned.channel") != 70+35 || g("retention.pruned.direct") != 3 ||
			g("retention.expired.queued") != 1 || g("retention.failed") != 0 {
			t.Fatalf("report %+v; counters %v", rep, a.Backend().Counters())
		}
		if a.metrics.Get("retention.pruned.channel") != 105 {
			t.Fatalf("retention.pruned.channel = %d", a.metrics.Get("retention.pruned.channel"))
		}
		// A second pass finds nothing to do.
		if rep := a.pruneOnce(now); rep.Channel+rep.Direct+rep.Queued != 0 {
			t.Fatalf("second pass removed %+v", rep)
		}
	})

	t.Run("archive node", func(t *testing.T) {
		a, counted, aged, _, rep := run(t, true)
		if got := channelCount(a, counted.ID); got != 120 {
			t.Fatalf("archive #counted keeps %d, want all 120", got)
		}
		if got := channelCount(a, aged.ID); got != 50 {
			t.Fatalf("archive #aged keeps %d, want 50 (only the 40-day-old 5 pruned)", got)
		}
		if a.metrics.Get("retention.pruned.channel") != 5 { // both passes, as above
			t.Fatalf("report %+v; counters %v", rep, a.Backend().Counters())
		}
	})
}

func a0archive(m *testMesh) bool {
	mem, _ := m.roster.Member(m.ids[0].Pub)
	return mem.Archive
}

// TestRetentionRunsInBackground: the pruner runs on its own, on a ticker,
// while the node delivers.
func TestRetentionRunsInBackground(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) { c.RetentionInterval = 100 * time.Millisecond })
	aged := retentionChannel(t, a, "aged", 1, 0)
	putOld(t, a, m.ids[1].Key, proto.ToChannel(aged.ID), time.Now().Add(-3*time.Hour), 40, proto.NewEpoch(), 1)
	waitFor(t, 5*time.Second, "background pruning", func() bool {
		return channelCount(a, aged.ID) == 0 && a.metrics.Get("retention.runs") > 0
	})
	// Sending goes on meanwhile.
	if _, err := a.out.Send(api.Send{To: "#aged", Body: "still here"}); err != nil {
		t.Fatal(err)
	}
	if got := channelCount(a, aged.ID); got != 1 {
		t.Fatalf("%d messages after a send", got)
	}
}

// A store that retention has mostly emptied is compacted when the node
// starts, and keeps what it held.
func TestCompactAtStart(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 1)
	path := filepath.Join(m.home(0), "history.db")
	a := m.startWith(0, nil)
	a.Close()
	st, err := history.Open(path, history.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch, epoch := uuid.New(), proto.NewEpoch()
	var batch []*proto.SignedEnvelope
	for i := 0; i < 3000; i++ {
		se, err := proto.SignEnvelope(m.ids[0].Key, &proto.Envelope{
			ID: proto.NewID(), From: m.ids[0].Pub, To: proto.ToChannel(ch), Kind: proto.KindMessage,
			TS: time.Now().UnixMilli(), TTL: 300, Seq: uint64(i + 1), Epoch: epoch,
			Message: &proto.Message{Body: strings.Repeat("x", 1024)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if batch = append(batch, se); len(batch) == 500 {
			if _, err := st.PutBatch(batch, false); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := st.Prune(ch, 0, 10, time.Now()); err != nil {
		t.Fatal(err)
	}
	free, before, err := st.Reclaimable()
	if err != nil || free*2 < before {
		t.Fatalf("setup: %d free of %d (%v)", free, before, err)
	}
	st.Close()

	// Above the threshold: left alone.
	a = m.startWith(0, func(c *Config) { c.CompactAtStart = before + 1 })
	if a.Backend().Counters()["store.compacted"] != 0 {
		t.Fatal("compacted a store below the size threshold")
	}
	a.Close()
	if fi, _ := os.Stat(path); fi.Size() < before {
		t.Fatalf("file shrank from %d to %d bytes without compaction", before, fi.Size())
	}

	a = m.startWith(0, func(c *Config) { c.CompactAtStart = 1 << 20 })
	if a.Backend().Counters()["store.compacted"] != 1 {
		t.Fatalf("counters: %v", a.Backend().Counters())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size()*2 > before {
		t.Fatalf("after compaction the file is %d bytes, was %d (%v)", fi.Size(), before, err)
	}
	if got := channelCount(a, ch); got != 10 {
		t.Fatalf("%d messages after compaction, want the 10 retention kept", got)
	}
}
