package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestCatchUpFillsACrossingAtAPageCut: a sender numbers an envelope
// before it stamps its time, so two sends at once can carry crossed ts:
// here number 100 is stamped after 101, and the first page of b's
// catch-up (100 envelopes in time order) ends with 101. The paging used
// to raise the mark past 100; the 2,900 numbers paged in above the hole
// overflowed the store's pending bound, which gave 100 up as lost, and no
// round asked for it again (TestCatchUpConvergence held 4,999 of 5,000).
// b must end with every envelope a holds.
func TestCatchUpFillsACrossingAtAPageCut(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, nil)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	epoch := proto.NewEpoch() // an earlier epoch of a: its numbers are ours to choose
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	var batch []*proto.SignedEnvelope
	for seq := uint64(1); seq <= n; seq++ {
		ts := base + int64(seq)
		switch seq {
		case 100:
			ts++
		case 101:
			ts--
		}
		se, err := proto.SignEnvelope(m.ids[0].Key, &proto.Envelope{
			ID: proto.NewID(), From: m.ids[0].Pub, To: proto.ToChannel(p.ID), Kind: proto.KindMessage,
			TS: ts, TTL: proto.DefaultTTL, Seq: seq, Epoch: epoch,
			Message: &proto.Message{Body: fmt.Sprintf("%05d", seq)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if batch = append(batch, se); len(batch) == 500 {
			if _, err := a.store.PutBatch(batch, false); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	want := channelIDs(t, a, p.ID)
	if len(want) != n {
		t.Fatalf("a holds %d, want %d", len(want), n)
	}
	b := m.startWith(1, nil, tcpAddr(t, a))
	waitPolicy(t, b, "ch")
	waitFor(t, 30*time.Second, "b's catch-up rounds to finish", func() bool { return syncIdle(b) })
	got := channelIDs(t, b, p.ID)
	if !sameSet(got, want) {
		g, _ := b.store.Gaps(proto.ToChannel(p.ID))
		t.Fatalf("b holds %d of %d; streams %+v", len(got), len(want), g)
	}
}
