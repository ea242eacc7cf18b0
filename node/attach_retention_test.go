package node

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestBlobRetention: a blob that only a pruned DM listed is removed by
// the retention pass (once past its grace), with its mailbox copy; a
// blob a kept DM lists stays.
func TestBlobRetention(t *testing.T) {
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
