package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBulkLaneYields: frames queued in the bulk lane go out only once
// the normal queue is empty, so envelopes queued after them still arrive
// first; the lane is bounded in bytes, and SendBulkWait waits for room.
func TestBulkLaneYields(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	c := newCollector(64)
	in.Start(c.handle)
	const bulkSize = 200 << 10
	n := 0
	for ; ; n++ {
		err := out.SendBulk(numbered(100+n, bulkSize))
		if errors.Is(err, ErrQueueFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != BulkQueueBytes/bulkSize || out.BulkQueued() != n*bulkSize {
		t.Fatalf("lane took %d frames (%d bytes), want %d", n, out.BulkQueued(), BulkQueueBytes/bulkSize)
	}
	for i := range 3 {
		if err := out.Send(numbered(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- out.SendBulkWait(ctx, numbered(100+n, bulkSize))
	}()
	out.Start(nil)
	for i := range 3 {
		if f := c.next(t); frameNo(f) != i {
			t.Fatalf("frame %d is number %d: a bulk frame went before a normal one", i, frameNo(f))
		}
	}
	for i := range n + 1 {
		if f := c.next(t); frameNo(f) != 100+i || len(f) != bulkSize {
			t.Fatalf("bulk frame %d is number %d (%d bytes)", i, frameNo(f), len(f))
		}
	}
	if err := <-done; err != nil {
		t.Fatal("SendBulkWait:", err)
	}
}

// TestBulkDroppedOnClose: bulk frames are never handed back by
// CloseAndDrain, and the lane refuses frames once the link closes.
func TestBulkDroppedOnClose(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, _ := pair(t, listen(t, "tcp", b), a, nil)
	if err := out.SendBulk(numbered(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := out.Send(numbered(2, 10)); err != nil {
		t.Fatal(err)
	}
	if fs := out.CloseAndDrain(nil); len(fs) != 1 || frameNo(fs[0]) != 2 {
		t.Fatalf("CloseAndDrain handed back %d frames", len(fs))
	}
	if err := out.SendBulk(numbered(3, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("SendBulk after close: %v", err)
	}
	if out.BulkQueued() != 0 {
		t.Fatal("bulk bytes left after close")
	}
}
