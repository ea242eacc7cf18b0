package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/internal/bubble"
)

// The link's timers (keepalive pings, the idle timeout, the bound on a
// blocked write) tested on synctest's clock over net.Pipe: the test
// waits minutes of link time in microseconds of real time, and asserts
// when things happen, not only that they happen, which real time on a
// loaded machine cannot.

// bubblePair returns two started links over net.Pipe, made inside the
// calling synctest bubble.
func bubblePair(t *testing.T, a, b Config) (out, in *Link) {
	t.Helper()
	c1, c2 := net.Pipe()
	return bubblePairOver(t, c1, c2, a, b)
}

// slowConn delays each write by a one-way latency, on the bubble's clock.
type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c slowConn) Write(b []byte) (int, error) {
	bubble.Advance(c.delay) // the simulated latency, on synctest's clock
	return c.Conn.Write(b)
}

// bubblePairOver is bubblePair over the given ends, c1 the dialing side's.
func bubblePairOver(t *testing.T, c1, c2 net.Conn, a, b Config) (out, in *Link) {
	t.Helper()
	ctx := context.Background()
	type res struct {
		l   *Link
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := Server(ctx, c2, b)
		ch <- res{l, err}
	}()
	out, err := Client(ctx, c1, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	in = r.l
	out.Start(nil)
	in.Start(nil)
	t.Cleanup(func() {
		out.Close()
		in.Close()
		<-out.Done()
		<-in.Done()
	})
	return out, in
}

// TestSynctestIdleLinkKeepalive: an idle link stays up for an hour on the
// default timers, carrying one ping and one pong per keepalive interval
// (not two of each), each side hearing from the other at least once per
// interval plus the grid step.
func TestSynctestIdleLinkKeepalive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, b := testConfig(t, testOrg), testConfig(t, testOrg)
		out, in := bubblePair(t, a, b)
		start := time.Now()
		worst := time.Duration(0)
		for time.Since(start) < time.Hour {
			bubble.Advance(time.Second) // synctest's clock, a second of link time at once
			synctest.Wait()
			for _, l := range []*Link{out, in} {
				if err := l.Err(); err != nil {
					t.Fatalf("idle link closed after %v: %v", time.Since(start), err)
				}
				worst = max(worst, time.Since(l.LastRecv()))
			}
		}
		ka := a.KeepaliveInterval
		if limit := ka + keepaliveGrid + time.Second; worst > limit {
			t.Errorf("a side heard nothing for %v (limit %v)", worst, limit)
		}
		so, si := out.Stats(), in.Stats()
		pings := so.PingsOut + si.PingsOut
		// One ping per interval, sent by the dialing side (the
		// accepting side waits a grid step longer, so the two never
		// ping in the same step); the grid may make an interval up to
		// a step longer.
		lo, hi := uint64(time.Hour/(ka+keepaliveGrid)), uint64(time.Hour/ka)+1
		if pings < lo || pings > hi {
			t.Errorf("%d pings in an hour, want %d-%d (out %+v, in %+v)", pings, lo, hi, so, si)
		}
		if so.PingsOut != si.PingsIn || si.PingsOut != so.PingsIn {
			t.Errorf("pings sent and received differ: out %+v, in %+v", so, si)
		}
		if si.PingsOut != 0 {
			t.Errorf("the accepting side pinged %d times while the dialing side pinged on time", si.PingsOut)
		}
	})
}

// TestSynctestKeepaliveWakesOncePerPing: on an idle link the dialing
// side's keepalive timer wakes once per ping it sends, and the accepting
// side's about once per ping it receives: a wake-up that neither pings
// nor falls a step after the peer's ping is wasted on every link of an
// idle node. (The dialing side used to wake an interval after each ping,
// a moment before the pong had aged an interval, only to re-arm.)
func TestSynctestKeepaliveWakesOncePerPing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// A millisecond each way, as between two processes: the pong
		// comes back after the ping went out, not at the same instant.
		c1, c2 := net.Pipe()
		ms := time.Millisecond
		out, in := bubblePairOver(t, slowConn{c1, ms}, slowConn{c2, ms}, testConfig(t, testOrg), testConfig(t, testOrg))
		bubble.Advance(time.Hour) // synctest's clock, an hour of idle link
		synctest.Wait()
		so, si := out.Stats(), in.Stats()
		if so.PingsOut < 100 {
			t.Fatalf("%d pings in an hour", so.PingsOut)
		}
		// One extra wake-up each: the first timer, set at link up.
		if so.KeepaliveWakes > so.PingsOut+1 {
			t.Errorf("dialing side: %d keepalive wake-ups for %d pings sent", so.KeepaliveWakes, so.PingsOut)
		}
		if si.KeepaliveWakes > si.PingsIn+1 {
			t.Errorf("accepting side: %d keepalive wake-ups for %d pings received", si.KeepaliveWakes, si.PingsIn)
		}
	})
}

// TestSynctestSilentPeerIdleTimeout: a peer that finishes the handshake
// and then reads but never sends is dropped with ErrTimeout once the idle
// timeout has passed (and at most an eighth of it later), not before.
func TestSynctestSilentPeerIdleTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := testConfig(t, testOrg)
		c1, c2 := net.Pipe()
		defer c2.Close()
		go func() {
			if _, err := rawRespond(t, c2, rawOpts{identity: newIdentity(t), org: testOrg}); err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, c2) // read, never answer
		}()
		out, err := Client(context.Background(), c1, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out.Start(nil)
		<-out.Done()
		took := time.Since(start)
		if !errors.Is(out.Err(), ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", out.Err())
		}
		if idle := a.IdleTimeout; took < idle || took > idle+idle/8+time.Second {
			t.Errorf("closed after %v, want %v to %v", took, idle, idle+idle/8+time.Second)
		}
		if st := out.Stats(); st.PingsOut < 2 {
			t.Errorf("%d pings before giving up, want at least 2 (one per keepalive interval)", st.PingsOut)
		}
	})
}

// TestSynctestBlockedWriteBounded: a peer that stops reading holds our
// writer in a blocked write; the link ends within the idle timeout (plus
// its eighth), whatever it still has queued, instead of hanging for ever.
func TestSynctestBlockedWriteBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := testConfig(t, testOrg)
		c1, c2 := net.Pipe()
		defer c2.Close()
		hs := make(chan *rawPeer, 1)
		go func() {
			rp, err := rawRespond(t, c2, rawOpts{identity: newIdentity(t), org: testOrg})
			if err != nil {
				t.Error(err)
			}
			hs <- rp // then neither read nor write: net.Pipe has no buffer
		}()
		out, err := Client(context.Background(), c1, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		if <-hs == nil {
			return
		}
		out.Start(nil)
		start := time.Now()
		if err := out.Send(append([]byte{1}, make([]byte, 1000)...)); err != nil {
			t.Fatal(err)
		}
		<-out.Done()
		took := time.Since(start)
		if out.Err() == nil {
			t.Fatal("link ended without an error")
		}
		if idle := a.IdleTimeout; took > idle+idle/8+time.Second {
			t.Errorf("a write blocked for %v, want at most %v", took, idle+idle/8+time.Second)
		}
	})
}
