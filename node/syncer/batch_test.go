package syncer

import (
	"context"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// A page goes to the node as a Batch: hand returns once the node reports
// it handed, with the node's count of new envelopes, and awaitStored
// returns once the node's commit stage reports it stored, not before.
func TestBatchHandedThenStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &Syncer{ctx: ctx, batches: make(chan *Batch)}
	envs := []*proto.SignedEnvelope{{}, {}, {}}
	got := make(chan *Batch, 1)
	go func() {
		b := <-s.Batches()
		b.Handed(2)
		b.Handed(3) // only the first report counts
		got <- b
	}()
	fresh, b := s.hand(envs, Source{History: true})
	if fresh != 2 || b == nil || len(b.Envelopes) != 3 || !b.Src.History {
		t.Fatalf("hand = %d, %+v; want 2 new of 3 history envelopes", fresh, b)
	}
	<-got
	stored := make(chan struct{})
	go func() {
		s.awaitStored(b)
		close(stored)
	}()
	select {
	case <-stored:
		t.Fatal("awaitStored returned before the commit stage reported the page stored")
	default:
	}
	b.Stored()
	b.Stored()
	select {
	case <-stored:
	case <-ctx.Done():
		t.Fatal("awaitStored did not return after Stored")
	}
}

// With nobody reading its batches (the node shutting down), hand and
// awaitStored return when the syncer's context ends; an empty page hands
// nothing.
func TestBatchShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Syncer{ctx: ctx, batches: make(chan *Batch)}
	if fresh, b := s.hand(nil, Source{}); fresh != 0 || b != nil {
		t.Fatalf("empty page: hand = %d, %v", fresh, b)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if fresh, b := s.hand([]*proto.SignedEnvelope{{}}, Source{}); fresh != 0 || b != nil {
			t.Errorf("after shutdown: hand = %d, %v", fresh, b)
		}
		s.awaitStored(newBatch(nil, Source{}))
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("hand did not return on shutdown")
	}
}
