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

// TestBudgetRefusalKeepsGap: a channel Message that catch-up offers but
// the reader refuses past its sender's attachment budget leaves a hole
// that the round keeps, although the sender itself served the round: it
// is not a number no peer holds, and a later round offers it again. (A
// round gave such a hole up before: sync.gaps_forgotten 1.)
func TestBudgetRefusalKeepsGap(t *testing.T) {
	m := newSyncMesh(t, 2)
	slow := func(c *Config) { c.SyncInterval = time.Hour }
	a := m.startWith(0, func(c *Config) { slow(c); c.AttachmentSenderMax = 1 << 20 })
	p, err := a.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	ch := p.ID
	if _, err := a.SetSubscription("ch", "subscribed"); err != nil {
		t.Fatal(err)
	}
	b := m.startWith(1, slow, transport.Addr{Network: "unix", Address: a.home.LinkSocket()})
	waitPolicy(t, b, "ch")
	waitFor(t, 10*time.Second, "a's link-up round", func() bool { return len(roundsOf(a, ch)) > 0 })

	// b's stream 1..3, 2 listing 2 MiB of attachment (a's budget for b is
	// 1 MiB): a holds 1 and 3, b all three.
	ep := proto.NewEpoch()
	var envs []*proto.SignedEnvelope
	for seq := uint64(1); seq <= 3; seq++ {
		msg := &proto.Message{Body: fmt.Sprintf("b %d", seq)}
		if seq == 2 {
			h := sha256.Sum256([]byte("two"))
			msg.Attachments = []proto.Attachment{{Name: "big.bin", Size: 2 << 20, MediaType: "application/octet-stream", SHA256: h, ChunkRoot: h}}
		}
		se, err := proto.SignEnvelope(m.ids[1].Key, &proto.Envelope{ID: proto.NewID(), From: m.ids[1].Pub, To: proto.ToChannel(ch),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 3600, Seq: seq, Epoch: ep, Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, se)
	}
	if _, err := a.store.PutBatch([]*proto.SignedEnvelope{envs[0], envs[2]}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.PutBatch(envs, false); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		before := len(roundsOf(a, ch))
		a.syncer.MarkDue(ch, true)
		waitFor(t, 10*time.Second, "a's round", func() bool { return len(roundsOf(a, ch)) > before })
		if got := a.metrics.Get("blob.quota"); got != uint64(round) {
			t.Fatalf("round %d: blob.quota = %d, want %d (b's 2 offered and refused each round)", round, got, round)
		}
	}
	if seen, _ := a.store.Seen(m.ids[1].Pub, envs[1].ID); seen {
		t.Fatal("the refused Message was stored")
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
	if holes != 1 {
		t.Fatalf("%d holes in a's streams, want b's 2 kept", holes)
	}
	if got := a.metrics.Get("drop.quota"); got != 2 {
		t.Fatalf("drop.quota = %d, want 2", got)
	}
}
