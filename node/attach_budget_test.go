package node

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// quotaGap runs two catch-up rounds of a channel in which reader a lacks
// some numbers of writer b's stream 1..n, holding the first and the
// last, and b holds them all: b itself serves the rounds. mod sets a's
// quota, and list(seq) the attachments of b's Message seq. It returns a.
func quotaGap(t *testing.T, n uint64, mod func(*Config), list func(seq uint64) []proto.Attachment) *Node {
	t.Helper()
	m := newSyncMesh(t, 2)
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	a := m.startWith(0, func(c *Config) { slow(c); mod(c) })
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	ch := p.ID
	if _, err := a.chans.SetSubscription("ch", "subscribed"); err != nil {
		t.Fatal(err)
	}
	b := m.startWith(1, slow, transport.Addr{Network: "unix", Address: a.home.LinkSocket()})
	waitPolicy(t, b, "ch")
	waitFor(t, 10*time.Second, "a's link-up round", func() bool { return len(roundsOf(a, ch)) > 0 })

	ep := proto.NewEpoch()
	var envs []*proto.SignedEnvelope
	for seq := uint64(1); seq <= n; seq++ {
		se, err := proto.SignEnvelope(m.ids[1].Key, &proto.Envelope{ID: proto.NewID(), From: m.ids[1].Pub, To: proto.ToChannel(ch),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 3600, Seq: seq, Epoch: ep,
			Message: &proto.Message{Body: fmt.Sprintf("b %d", seq), Attachments: list(seq)}})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, se)
	}
	if _, err := a.store.PutBatch([]*proto.SignedEnvelope{envs[0], envs[n-1]}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.PutBatch(envs, false); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		before := len(roundsOf(a, ch))
		a.rx.Sync.MarkDue(ch, true)
		waitFor(t, 10*time.Second, "a's round", func() bool { return len(roundsOf(a, ch)) > before })
		if got := a.metrics.Get("drop.quota"); got < uint64(round) {
			t.Fatalf("round %d: drop.quota = %d: nothing refused", round, got)
		}
	}
	if got := a.metrics.Get("sync.gaps_forgotten"); got != 0 {
		t.Fatalf("sync.gaps_forgotten = %d: the round gave up the hole of a Message it refused", got)
	}
	streams, err := a.store.Gaps(proto.ToChannel(ch))
	if err != nil {
		t.Fatal(err)
	}
	holes := 0
	for _, s := range streams {
		holes += len(s.Missing)
	}
	if holes == 0 {
		t.Fatal("no hole left in a's streams: the refused numbers were given up")
	}
	return a
}

// TestBudgetRefusalKeepsGap: a channel Message that catch-up offers but
// the reader refuses past its sender's attachment budget leaves a hole
// that the round keeps, although the sender itself served the round: it
// is not a number no peer holds, and a later round offers it again. (A
// round gave such a hole up before: sync.gaps_forgotten 1.)
func TestBudgetRefusalKeepsGap(t *testing.T) {
	t.Parallel()
	a := quotaGap(t, 3, func(c *Config) { c.AttachmentSenderMax = 1 << 20 }, func(seq uint64) []proto.Attachment {
		if seq != 2 {
			return nil
		}
		h := sha256.Sum256([]byte("two"))
		return []proto.Attachment{{Name: "big.bin", Size: 2 << 20, MediaType: "application/octet-stream", SHA256: h, ChunkRoot: h}}
	})
	// b's 2 lists 2 MiB, past a's 1 MiB budget for b: offered and refused
	// in each round.
	if got := a.metrics.Get("blob.quota"); got != 2 {
		t.Fatalf("blob.quota = %d, want 2", got)
	}
	if got := a.metrics.Get("drop.quota"); got != 2 {
		t.Fatalf("drop.quota = %d, want 2", got)
	}
	if n := len(a.attach.refHashes()); n != 0 {
		t.Fatalf("%d blobs referenced: the refused Message was recorded", n)
	}
}

// TestChannelQuotaRefusalKeepsGap: the same for a Message refused by the
// channel quota's history bucket (5 with a burst of 1): of b's 2..7 the
// first five are taken, 7 is refused, and its hole is kept for a round
// once the bucket refilled.
func TestChannelQuotaRefusalKeepsGap(t *testing.T) {
	t.Parallel()
	a := quotaGap(t, 8, func(c *Config) { c.ChannelSenderBurst, c.ChannelSenderRate = 1, 1 },
		func(uint64) []proto.Attachment { return nil })
	if got := a.metrics.Get("blob.quota"); got != 0 {
		t.Fatalf("blob.quota = %d, want 0", got)
	}
}
