package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The syncer's close is idempotent, waits for its goroutines, and after
// it history envelopes are dropped as "shutdown" while the node runs on.
func TestSyncerCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, nil)
	a.rx.Sync.Close()
	a.rx.Sync.Close()
	se, err := a.out.Sign(proto.ToPeer(a.Identity()), proto.KindHistoryRequest, time.Minute, func(e *proto.Envelope) {
		e.HistoryRequest = &proto.HistoryRequest{ChannelID: uuid.New(), MaxMessages: 1, MaxBytes: 1024}
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.rx.Sync.Handle(se, syncer.Source{}, time.Now()) {
		t.Fatal("a closed syncer took a HistoryRequest")
	}
	if got := a.metrics.Get("drop.shutdown"); got != 1 {
		t.Fatalf("drop.shutdown = %d, want 1", got)
	}
	if err := a.Close(); err != nil { // closes the syncer a third time
		t.Fatal(err)
	}
}

// Paging pauses after syncer.MaxRoundPages pages from one peer in one round, and
// the next round, due at once, resumes where it paused: c backfills 250
// messages in pages of one (250 pages) from a alone, in two rounds, the
// second of which starts from a cursor, not from the window's start.
func TestPagingPausesAndResumes(t *testing.T) {
	t.Parallel()
	const total = syncer.MaxRoundPages + 50
	m := newSyncMesh(t, 3)
	a := m.startWith(0, nil)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	fillChannel(t, a, p.ID, total, 10)
	c := m.startWith(2, func(cfg *Config) { cfg.SyncPageMessages = 1 }, tcpAddr(t, a))
	waitFor(t, 60*time.Second, "c backfilled every message", func() bool { return channelCount(c, p.ID) == total })
	// Paging pauses at syncer.MaxRoundPages; on a loaded machine a page may also
	// time out, or its request find the link's queue full, and be resumed
	// from its cursor, so both are counted at least once. What must never happen, paging again from the
	// window's start, the page count below proves.
	if got := c.metrics.Get("sync.paused"); got < 1 {
		t.Errorf("sync.paused = %d, want at least 1", got)
	}
	if got := c.metrics.Get("sync.resumed"); got < 1 {
		t.Errorf("sync.resumed = %d, want at least 1", got)
	}
	pages := 0
	for _, r := range roundsOf(c, p.ID) {
		for _, pr := range r.Peers {
			pages += pr.Pages
		}
	}
	// One page each, and one last empty page at most: no page twice.
	if pages > total+1 {
		t.Errorf("%d pages for %d messages: paging started again from the window's start", pages, total)
	}
}

// A cursor's marks may have passed a hole (NextHistoryRequest raises a
// mark past one); a full round that resumes paging from it must still
// ask that peer for the holes from the stored marks once the resumed
// paging is done. Here a pages b from a cursor saved past s's seq 4,
// which b holds: the round fetches it, not the next periodic one.
func TestResumedCursorStillFillsHoles(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 3)
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	a := m.startWith(0, slow)
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	ch := p.ID
	// b dials a's Unix socket: a TCP link would move to it (§14.12), and
	// the link-up round of the new link could take the cursor this test
	// sets before the round it marks due.
	b := m.startWith(1, slow, transport.Addr{Network: "unix", Address: a.home.LinkSocket()})
	waitPolicy(t, b, "ch")
	waitFor(t, 10*time.Second, "a's link-up round", func() bool { return len(roundsOf(a, ch)) > 0 })

	// s's stream 1..5: a holds all but 4, b holds all.
	s, ep := m.ids[2].Key, proto.NewEpoch()
	var envs []*proto.SignedEnvelope
	for seq := uint64(1); seq <= 5; seq++ {
		se, err := proto.SignEnvelope(s, &proto.Envelope{ID: proto.NewID(), From: m.ids[2].Pub, To: proto.ToChannel(ch),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 3600, Seq: seq, Epoch: ep,
			Message: &proto.Message{Body: fmt.Sprintf("s %d", seq)}})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, se)
	}
	if _, err := a.store.PutBatch([]*proto.SignedEnvelope{envs[0], envs[1], envs[2], envs[4]}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.PutBatch(envs, false); err != nil {
		t.Fatal(err)
	}
	// Paging with b stopped after a page that held seq 5: its cursor
	// asks for what follows 5.
	a.rx.Sync.ResumeFrom(m.ids[1].Pub, &proto.HistoryRequest{ChannelID: ch, SinceTS: envs[4].TS,
		MaxMessages: uint32(a.cfg.SyncPageMessages), MaxBytes: uint32(a.cfg.SyncPageBytes),
		SinceSeqBySender: []proto.SeqMark{{Sender: m.ids[2].Pub, Epoch: ep, LastSeq: 5}}})
	a.rx.Sync.MarkDue(ch, false)
	waitFor(t, 10*time.Second, "a fetched s's 4 from b", func() bool {
		ok, err := a.store.Seen(m.ids[2].Pub, envs[3].ID)
		return err == nil && ok
	})
	if got := a.metrics.Get("sync.resumed"); got != 1 {
		t.Errorf("sync.resumed = %d, want 1: the round did not start from the cursor", got)
	}
}
