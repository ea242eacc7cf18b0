package node

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// The syncer's close is idempotent, waits for its goroutines, and after
// it history envelopes are dropped as "shutdown" while the node runs on.
func TestSyncerCloseIsIdempotent(t *testing.T) {
	m := newSyncMesh(t, 2)
	a := m.startWith(0, nil)
	a.syncer.close()
	a.syncer.close()
	se, err := a.sign(proto.ToPeer(a.Identity()), proto.KindHistoryRequest, time.Minute, func(e *proto.Envelope) {
		e.HistoryRequest = &proto.HistoryRequest{ChannelID: uuid.New(), MaxMessages: 1, MaxBytes: 1024}
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.syncer.handle(se, rxSource{}, time.Now()) {
		t.Fatal("a closed syncer took a HistoryRequest")
	}
	if got := a.metrics.Get("drop.shutdown"); got != 1 {
		t.Fatalf("drop.shutdown = %d, want 1", got)
	}
	if err := a.Close(); err != nil { // closes the syncer a third time
		t.Fatal(err)
	}
}
