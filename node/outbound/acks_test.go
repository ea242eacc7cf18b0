package outbound

import (
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// TestReaderAcksBounded: reader acks wait for their batched count up to
// maxReaderAcks ids; more are refused (and counted by the caller as
// ack.reader_uncounted), and a take empties the batch.
func TestReaderAcksBounded(t *testing.T) {
	r := newReaderAcks()
	var a, b proto.PubKey
	a[0], b[0] = 1, 2
	ids := make([]uuid.UUID, maxReaderAcks-10)
	if d := r.add(a, ids); d != 0 {
		t.Fatalf("%d dropped below the bound", d)
	}
	if d := r.add(b, make([]uuid.UUID, 25)); d != 15 {
		t.Fatalf("%d dropped past the bound, want 15", d)
	}
	if d := r.add(b, make([]uuid.UUID, 1)); d != 1 {
		t.Fatalf("%d dropped when full, want 1", d)
	}
	got := r.take()
	if len(got[a]) != maxReaderAcks-10 || len(got[b]) != 10 {
		t.Fatalf("took %d and %d ids", len(got[a]), len(got[b]))
	}
	if r.take() != nil {
		t.Fatal("a second take returned ids")
	}
	if d := r.add(a, make([]uuid.UUID, 3)); d != 0 {
		t.Fatalf("%d dropped after a take emptied the batch", d)
	}
}

// TestReaderAcksWakeOnlyWithAcks: the loop that counts reader acks is
// woken by the first ack of a batch and by nothing else, so an idle node
// never wakes for it (it used to tick twice a second). Acks added to a
// batch already waiting do not wake it again; the first after a take
// does.
func TestReaderAcksWakeOnlyWithAcks(t *testing.T) {
	r := newReaderAcks()
	woken := func() bool {
		select {
		case <-r.ready:
			return true
		default:
			return false
		}
	}
	if woken() {
		t.Fatal("an empty batch woke the loop")
	}
	var a proto.PubKey
	a[0] = 1
	r.add(a, make([]uuid.UUID, 2))
	if !woken() {
		t.Fatal("the first ack did not wake the loop")
	}
	r.add(a, make([]uuid.UUID, 3))
	if woken() {
		t.Fatal("an ack added to a waiting batch woke the loop again")
	}
	if got := r.take(); len(got[a]) != 5 {
		t.Fatalf("took %d ids, want 5", len(got[a]))
	}
	if r.take() != nil || woken() {
		t.Fatal("an empty take returned ids or woke the loop")
	}
	r.add(a, make([]uuid.UUID, 1))
	if !woken() {
		t.Fatal("the first ack after a take did not wake the loop")
	}
}

// TestReaderAcksSentBounded: the ids of our latest maxSentIDs channel
// Messages are known (an ack frame naming only them skips the queue
// lookup); an older one is forgotten, and a frame that names any id not
// known, or none, is not taken for reader acks alone.
func TestReaderAcksSentBounded(t *testing.T) {
	r := newReaderAcks()
	ids := make([]uuid.UUID, maxSentIDs+1)
	for i := range ids {
		ids[i] = uuid.New()
		r.noteSent(ids[i])
	}
	r.noteSent(ids[maxSentIDs]) // noted twice: kept once
	if r.allSent(ids[:1]) {
		t.Fatal("the oldest id is still known past the bound")
	}
	if !r.allSent(ids[1:]) {
		t.Fatal("one of the latest ids is not known")
	}
	if r.allSent(nil) {
		t.Fatal("an empty frame was taken for reader acks")
	}
	if r.allSent([]uuid.UUID{ids[5], uuid.New()}) {
		t.Fatal("a frame naming an unknown id was taken for reader acks alone")
	}
	if len(r.sent) != maxSentIDs || len(r.ring) != maxSentIDs {
		t.Fatalf("%d ids in the set, %d in the ring, want %d", len(r.sent), len(r.ring), maxSentIDs)
	}
}
