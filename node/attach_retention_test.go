package node

import (
	"bytes"
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestBlobRetention: a blob that only a pruned DM listed is removed by
// the retention pass (once past its grace), with its mailbox copy; a
// blob a kept DM lists stays.
func TestBlobRetention(t *testing.T) {
	t.Parallel()
	now := time.Now()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) { c.RetentionInterval = time.Hour })
	b := m.ids[1].Key
	put := func(content string, at time.Time) (proto.Attachment, *proto.SignedEnvelope) {
		t.Helper()
		att, err := a.attach.store.Add(bytes.NewReader([]byte(content)), "f.txt", "text/plain")
		if err != nil {
			t.Fatal(err)
		}
		e := &proto.Envelope{ID: proto.NewID(), From: proto.PubKeyOf(b), To: proto.ToPeer(a.Identity()), Kind: proto.KindMessage,
			TS: at.UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
			Message: &proto.Message{Body: "x", Attachments: []proto.Attachment{att}}}
		se, err := proto.SignEnvelope(b, e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Put(se, true); err != nil {
			t.Fatal(err)
		}
		a.attach.noteRefs(se, at)
		a.attach.place(want{From: se.From, ID: se.ID, Delivered: at.UnixMilli(), A: att})
		return att, se
	}
	old, oldEnv := put("old file", now.Add(-100*time.Hour))
	kept, _ := put("kept file", now.Add(-time.Hour))
	oldCopy := a.attachmentPath(oldEnv, now.Add(-100*time.Hour), old)
	if _, err := os.Stat(oldCopy); err != nil {
		t.Fatal("the old attachment was not placed:", err)
	}

	// Within the grace, nothing goes even once its DM is pruned.
	a.pruneOnce(now)
	if !a.attach.store.Has(old.SHA256) {
		t.Fatal("a blob went within its grace")
	}
	a.pruneOnce(now.Add(2 * blobGrace))
	if a.attach.store.Has(old.SHA256) {
		t.Fatal("the blob only a pruned DM listed is still stored")
	}
	if _, err := os.Stat(oldCopy); err == nil {
		t.Fatal("its mailbox copy is still there")
	}
	if !a.attach.store.Has(kept.SHA256) {
		t.Fatal("the blob a kept DM lists was removed")
	}
	if a.metrics.Get("blob.pruned") != 1 {
		t.Fatalf("blob.pruned = %d, want 1", a.metrics.Get("blob.pruned"))
	}
}

// TestAttachmentBudgetFreedByRetention: what a sender's kept DMs list
// counts against its attachment budget, fetched or not, and the
// retention pass that removes a DM gives its bytes back: also for a blob
// this node never fetched, whose references the pass once never visited.
func TestAttachmentBudgetFreedByRetention(t *testing.T) {
	t.Parallel()
	now := time.Now()
	m := newSyncMesh(t, 2)
	a := m.startWith(0, func(c *Config) { c.RetentionInterval = time.Hour })
	b := m.ids[1]
	dm := func(at time.Time, size uint64) *proto.SignedEnvelope {
		t.Helper()
		id := proto.NewID()
		att := proto.Attachment{Name: "f.bin", Size: size, MediaType: "application/octet-stream",
			SHA256: sha256.Sum256(id[:]), ChunkRoot: proto.Hash{1}}
		se, err := proto.SignEnvelope(b.Key, &proto.Envelope{ID: id, From: b.Pub, To: proto.ToPeer(a.Identity()),
			Kind: proto.KindMessage, TS: at.UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
			Message: &proto.Message{Body: "x", Attachments: []proto.Attachment{att}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Put(se, true); err != nil {
			t.Fatal(err)
		}
		a.attach.noteRefs(se, at) // never fetched: no blob in the store
		return se
	}
	used := func() uint64 {
		a.attach.refMu.Lock()
		defer a.attach.refMu.Unlock()
		return a.attach.usageLocked()[b.Pub]
	}
	dm(now.Add(-100*time.Hour), 3<<20)
	dm(now.Add(-time.Hour), 2<<20)
	if got := used(); got != 5<<20 {
		t.Fatalf("b's attachments count %d bytes, want %d", got, 5<<20)
	}
	a.pruneOnce(now) // removes the DM older than DirectRetention (72 h)
	if got := used(); got != 2<<20 {
		t.Fatalf("after retention removed b's older DM, b's attachments count %d bytes, want %d", got, 2<<20)
	}
	// A restart rebuilds the same figure from the references left.
	a.attach.refMu.Lock()
	a.attach.usage = nil
	a.attach.refMu.Unlock()
	if got := used(); got != 2<<20 {
		t.Fatalf("rebuilt from the references: %d bytes, want %d", got, 2<<20)
	}
}
