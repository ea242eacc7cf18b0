package transport

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

// TestSendQueueBytes: the send queue is bounded in bytes as well as in
// frames, a frame larger than the bound still fits an empty queue, and
// WaitRoom and SendWait wait for bytes to leave it.
func TestSendQueueBytes(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.SendQueueBytes = 10 << 10
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	// Not started, so nothing drains the queue.
	big := randomFrame(t, 64<<10)
	if err := out.Send(big); err != nil {
		t.Fatalf("a frame above the bound into an empty queue: %v", err)
	}
	if err := out.Send([]byte("x")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Send past the byte bound = %v, want ErrQueueFull", err)
	}
	if n, c := out.QueueBytes(); n != len(big) || c != 10<<10 {
		t.Fatalf("QueueBytes = %d, %d", n, c)
	}
	if n, _ := out.QueueLen(); n != 1 {
		t.Fatalf("QueueLen = %d, want 1 (the refused frame is not queued)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := out.WaitRoom(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRoom on a full queue = %v, want the ctx deadline", err)
	}
	if err := out.SendWait(ctx, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendWait on a full queue = %v, want the ctx deadline", err)
	}

	got := newCollector(64)
	in.Start(got.handle)
	roomc := make(chan error, 1)
	go func() { roomc <- out.WaitRoom(context.Background(), 4<<10) }()
	sendc := make(chan error, 1)
	small := randomFrame(t, 6<<10)
	go func() { sendc <- out.SendWait(context.Background(), small) }()
	out.Start(nil)
	for _, c := range []chan error{roomc, sendc} {
		select {
		case err := <-c:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no room after the writer drained the queue")
		}
	}
	if f := got.next(t); !bytes.Equal(f, big) {
		t.Fatal("first frame differs")
	}
	if f := got.next(t); !bytes.Equal(f, small) {
		t.Fatal("second frame differs")
	}
	if st := out.Stats(); st.QueueFull != 1 {
		t.Errorf("QueueFull = %d, want 1", st.QueueFull)
	}
	// Everything written: the byte count is back to zero.
	if n, _ := out.QueueBytes(); n != 0 {
		t.Errorf("QueueBytes after draining = %d", n)
	}
}

// TestSendQueueBytesConcurrent: many senders racing for a small byte
// budget never let the queue hold more than the bound (plus one frame
// taken into an empty queue), and every accepted frame arrives.
func TestSendQueueBytesConcurrent(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.SendQueueBytes = 32 << 10
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	var mu sync.Mutex
	received := 0
	in.Start(func([]byte) { mu.Lock(); received++; mu.Unlock() })
	out.Start(nil)
	const senders, each = 8, 200
	var wg sync.WaitGroup
	var over sync.Once
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame := make([]byte, 3000)
			for range each {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := out.SendWait(ctx, frame)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if n, _ := out.QueueBytes(); n > 32<<10 {
					over.Do(func() { t.Errorf("queue holds %d bytes, bound %d", n, 32<<10) })
				}
			}
		}()
	}
	wg.Wait()
	var r int
	if !testwait.Until(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		r = received
		return r == senders*each
	}) {
		t.Fatalf("received %d of %d frames", r, senders*each)
	}
}

// TestNonReadingPeerClosed: a peer that keeps sending (so the link is not
// idle) but never reads is closed once a write blocks past the write
// deadline, with ErrSlowReader, and what was queued for it is bounded.
func TestNonReadingPeerClosed(t *testing.T) {
	checkLeaks(t)
	b := testConfig(t, testOrg)
	b.KeepaliveInterval = 100 * time.Millisecond
	b.IdleTimeout = 400 * time.Millisecond
	b.SendQueueBytes = 1 << 20
	ln := listen(t, "tcp", b)
	rp := rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg})
	if tc, ok := rp.conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	in, err := ln.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	in.Start(nil)
	// The peer pings, never reads.
	stop := make(chan struct{})
	var pinger sync.WaitGroup
	pinger.Add(1)
	go func() {
		defer pinger.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if rp.sendMsg(hdrPing, nil) != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); pinger.Wait() }()

	// Fill the kernel buffers and the queue: SendWait waits for room,
	// Send refuses past the bound.
	frame := make([]byte, 256<<10)
	refused := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := in.SendWait(ctx, frame)
		cancel()
		if errors.Is(err, ErrClosed) {
			break
		}
		if errors.Is(err, context.DeadlineExceeded) {
			refused++
		}
		if n, _ := in.QueueBytes(); n > 1<<20 {
			t.Fatalf("queue holds %d bytes, bound 1 MiB", n)
		}
		if refused > 1000 {
			t.Fatal("link still open after 20 s of a blocked writer")
		}
	}
	err = waitDone(t, in, 5*time.Second)
	if !errors.Is(err, ErrSlowReader) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrSlowReader and ErrTimeout", err)
	}
	if refused == 0 {
		t.Error("the queue never filled")
	}
}

// TestRecvRate: past the receive rate the reader waits for tokens instead
// of dropping: every frame arrives, intact and in order, no faster than
// the rate allows, and the waits are counted.
func TestRecvRate(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	b.RecvRate = 512 << 10
	b.RecvBurst = 64 << 10
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	got := newCollector(64)
	in.Start(got.handle)
	out.Start(nil)
	const frames = 24
	start := time.Now()
	var sent [][]byte
	for range frames {
		f := randomFrame(t, 64<<10)
		sent = append(sent, f)
		if err := out.SendWait(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	for i := range frames {
		if f := got.next(t); !bytes.Equal(f, sent[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	el := time.Since(start)
	// 1.5 MiB at 512 KiB/s after a 64 KiB burst: at least 2.8 s.
	if el < 2500*time.Millisecond {
		t.Errorf("1.5 MiB arrived in %v, faster than 512 KiB/s", el)
	}
	st := in.Stats()
	if st.RecvThrottled == 0 || st.RecvThrottledTime < 2*time.Second {
		t.Errorf("throttling not counted: %+v", st)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("link failed while paced: %v", err)
	}
}
