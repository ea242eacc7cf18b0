package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

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

// TestCatchUpFillsALateHoleBehindOtherStreams: carol's 51 is stamped
// after everything else in the channel, and b, which holds her 1..50 and
// 52, pages with a peer that also holds 150 envelopes of another stream,
// stamped between her 52 and her 51. The first page (in time order)
// ends inside the other stream with her 52 in it and not her 51, so the
// paging raises her mark past 51 and the page that holds it never comes.
// The round then asks the peer for the streams with holes alone, and b
// holds 51 when the round ends (it used to wait for a later round, which
// paged the same way).
func TestCatchUpFillsALateHoleBehindOtherStreams(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 3) // carol (2) never starts: b keeps her hole rather than giving it up
	a := m.startWith(0, nil)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	sign := func(i int, epoch uuid.UUID, seq uint64, ts int64) *proto.SignedEnvelope {
		se, err := proto.SignEnvelope(m.ids[i].Key, &proto.Envelope{
			ID: proto.NewID(), From: m.ids[i].Pub, To: proto.ToChannel(p.ID), Kind: proto.KindMessage,
			TS: ts, TTL: proto.DefaultTTL, Seq: seq, Epoch: epoch,
			Message: &proto.Message{Body: fmt.Sprintf("%d/%d", i, seq)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return se
	}
	put := func(ses []*proto.SignedEnvelope) {
		if _, err := a.store.PutBatch(ses, false); err != nil {
			t.Fatal(err)
		}
	}
	carol := proto.NewEpoch()
	var first []*proto.SignedEnvelope
	for seq := uint64(1); seq <= 50; seq++ {
		first = append(first, sign(2, carol, seq, base+int64(seq)))
	}
	put(append(first, sign(2, carol, 52, base+52)))

	b := m.startWith(1, func(c *Config) { c.SyncInterval = -1 }, tcpAddr(t, a))
	waitPolicy(t, b, "ch")
	waitFor(t, 30*time.Second, "b's first catch-up", func() bool { return channelCount(b, p.ID) == 51 && syncIdle(b) })

	late := sign(2, carol, 51, base+10_000)
	other := proto.NewEpoch() // an earlier epoch of a's
	var between []*proto.SignedEnvelope
	for seq := uint64(1); seq <= 150; seq++ {
		between = append(between, sign(0, other, seq, base+100+int64(seq)))
	}
	put(append(between, late))

	marked := time.Now()
	b.rx.Sync.MarkDue(p.ID, false)
	r := roundAfter(t, b, p.ID, marked, 30*time.Second)
	if !channelIDs(t, b, p.ID)[late.ID] {
		g, _ := b.store.Gaps(proto.ToChannel(p.ID))
		t.Fatalf("the round ended without carol's 51 (%d pages from a); streams %+v", r.Peers[0].Pages, g)
	}
	if got := channelCount(b, p.ID); got != 51+1+150 {
		t.Fatalf("b holds %d, want %d", got, 51+1+150)
	}
}
