package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

var frameSizes = []int{0, 1, 1024, maxChunk - 1, maxChunk, maxChunk + 1, 65519, 65520, 1 << 20, proto.MaxFrameSize}

func randomFrame(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// exchange sends every size from a to b and from b to a at once and
// checks what arrives.
func exchange(t *testing.T, a, b *Link, ca, cb *collector) {
	t.Helper()
	var toB, toA [][]byte
	for _, n := range frameSizes {
		toB = append(toB, randomFrame(t, n))
		toA = append(toA, randomFrame(t, n))
	}
	for i := range toB {
		if err := a.Send(toB[i]); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(toA[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range toB {
		if got := cb.next(t); !bytes.Equal(got, toB[i]) {
			t.Fatalf("frame %d (%d bytes) to b: got %d bytes, different", i, len(toB[i]), len(got))
		}
		if got := ca.next(t); !bytes.Equal(got, toA[i]) {
			t.Fatalf("frame %d (%d bytes) to a: got %d bytes, different", i, len(toA[i]), len(got))
		}
	}
}

func TestLinkFrames(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			checkLeaks(t)
			a, b := testConfig(t, testOrg), testConfig(t, testOrg)
			a.Payload = func() proto.HandshakePayload {
				return proto.HandshakePayload{Name: "alpha", RosterVersion: 7, Listen: []string{"tcp://10.0.0.1:7000"}}
			}
			b.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{Name: "bravo", RosterVersion: 9} }
			lnA, lnB := listen(t, network, a), listen(t, network, b)
			for _, dir := range []string{"a-dials-b", "b-dials-a"} {
				t.Run(dir, func(t *testing.T) {
					from, to, ln := a, b, lnB
					if dir == "b-dials-a" {
						from, to, ln = b, a, lnA
					}
					bKey := keyOf(to)
					out, in := pair(t, ln, from, &bKey)
					if !out.Outbound() || in.Outbound() {
						t.Error("Outbound wrong")
					}
					if !out.PeerKey().Equal(keyOf(to)) || !in.PeerKey().Equal(keyOf(from)) {
						t.Error("peer keys wrong")
					}
					if out.Network() != network || in.Network() != network {
						t.Errorf("Network = %q, %q", out.Network(), in.Network())
					}
					if out.RemoteAddr() == "" || in.RemoteAddr() == "" {
						t.Errorf("RemoteAddr = %q, %q", out.RemoteAddr(), in.RemoteAddr())
					}
					if network == "unix" && (out.RemoteAddr() != ln.Addr().Address || in.RemoteAddr() != ln.Addr().Address) {
						t.Errorf("unix RemoteAddr = %q, %q, want %q", out.RemoteAddr(), in.RemoteAddr(), ln.Addr().Address)
					}
					if out.LocalAddr() == "" || out.LocalAddr() != in.RemoteAddr() && network == "tcp" {
						t.Errorf("LocalAddr %q, peer's RemoteAddr %q", out.LocalAddr(), in.RemoteAddr())
					}
					if out.SessionID() != in.SessionID() || out.SessionID() == [32]byte{} {
						t.Error("SessionID differs between the ends")
					}
					if time.Since(out.Established()) > time.Minute || out.Established().IsZero() {
						t.Error("Established wrong")
					}
					wantName := map[bool]string{true: "alpha", false: "bravo"}
					if got := in.Peer().Name; got != wantName[from.Identity.Equal(a.Identity)] {
						t.Errorf("peer name %q", got)
					}
					if in.Peer().Org != testOrg || in.Peer().Version != proto.ProtocolVersion {
						t.Errorf("peer payload %+v", in.Peer())
					}
					if from.Identity.Equal(a.Identity) && (in.Peer().RosterVersion != 7 || len(in.Peer().Listen) != 1) {
						t.Errorf("payload fields lost: %+v", in.Peer())
					}
					cOut, cIn := newCollector(len(frameSizes)), newCollector(len(frameSizes))
					out.Start(cOut.handle)
					in.Start(cIn.handle)
					exchange(t, out, in, cOut, cIn)
					st := out.Stats()
					if st.FramesOut != uint64(len(frameSizes)) || st.FramesIn != uint64(len(frameSizes)) {
						t.Errorf("stats %+v", st)
					}
					var total uint64
					for _, n := range frameSizes {
						total += uint64(n)
					}
					if st.BytesOut != total || in.Stats().BytesIn != total {
						t.Errorf("bytes out %d, in %d, want %d", st.BytesOut, in.Stats().BytesIn, total)
					}
					if out.LastRecv().Before(out.Established()) {
						t.Error("LastRecv not updated")
					}
				})
			}
		})
	}
}

func TestPipeLink(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pipePair(t, a, b)
	defer out.Close()
	defer in.Close()
	if out.Network() != "pipe" {
		t.Errorf("Network = %q", out.Network())
	}
	ca, cb := newCollector(len(frameSizes)), newCollector(len(frameSizes))
	out.Start(ca.handle)
	in.Start(cb.handle)
	exchange(t, out, in, ca, cb)
}

// TestConcurrentSendOrder checks that frames from each sending goroutine
// arrive in the order that goroutine sent them.
func TestConcurrentSendOrder(t *testing.T) {
	checkLeaks(t)
	const senders, each = 8, 500
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.SendQueue = 64 // small, so the queue fills and senders retry
	out, in := pair(t, listen(t, "tcp", b), a, nil)

	var mu sync.Mutex
	next := make([]uint32, senders)
	got := 0
	done := make(chan struct{})
	var bad error
	in.Start(func(f []byte) {
		mu.Lock()
		defer mu.Unlock()
		s, seq := f[0], binary.BigEndian.Uint32(f[1:5])
		if seq != next[s] && bad == nil {
			bad = fmt.Errorf("sender %d: got seq %d, want %d", s, seq, next[s])
		}
		next[s] = seq + 1
		if got++; got == senders*each {
			close(done)
		}
	})
	out.Start(nil)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range uint32(each) {
				f := make([]byte, 5+int(seq%200)*7)
				f[0] = byte(s)
				binary.BigEndian.PutUint32(f[1:], seq)
				// A full queue is waited out (TestSendQueueFull covers Send's refusal).
				if err := out.SendWait(context.Background(), f); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("received %d of %d frames", got, senders*each)
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		t.Fatal(bad)
	}
}

func TestKeepaliveKeepsIdleLinkUp(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	for _, c := range []*Config{&a, &b} {
		// Generous ratios: on a loaded machine a goroutine can wait
		// hundreds of milliseconds to run.
		c.KeepaliveInterval = 50 * time.Millisecond
		c.IdleTimeout = 800 * time.Millisecond
	}
	out, in := pair(t, listen(t, "unix", b), a, nil)
	out.Start(nil)
	in.Start(nil)
	time.Sleep(2 * time.Second) // deliberate: over two idle timeouts with no frames but keepalives
	for _, l := range []*Link{out, in} {
		if err := l.Err(); err != nil {
			t.Fatalf("idle link closed: %v (stats out %+v, in %+v)", err, out.Stats(), in.Stats())
		}
		if time.Since(l.LastRecv()) > 800*time.Millisecond {
			t.Errorf("LastRecv %v ago", time.Since(l.LastRecv()))
		}
	}
	// The dialing side pings; the accepting side answers (and pings
	// only when the dialing side is late).
	if so, si := out.Stats(), in.Stats(); so.PingsOut == 0 || si.PingsIn == 0 {
		t.Errorf("no keepalive traffic: out %+v, in %+v", so, si)
	}
}

// TestSilentPeerTimesOut: a peer that completes the handshake and then
// neither sends nor reads is dropped with ErrTimeout.
func TestSilentPeerTimesOut(t *testing.T) {
	checkLeaks(t)
	t.Run("accepted", func(t *testing.T) {
		b := testConfig(t, testOrg)
		b.KeepaliveInterval = 20 * time.Millisecond
		b.IdleTimeout = 150 * time.Millisecond
		ln := listen(t, "tcp", b)
		rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg})
		in, err := ln.Accept(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		in.Start(nil)
		start := time.Now()
		err = waitDone(t, in, 3*time.Second)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("closed after %v, before the idle timeout", d)
		}
	})
	t.Run("dialed", func(t *testing.T) {
		addr := rawServer(t, func(c net.Conn) {
			if _, err := rawRespond(t, c, rawOpts{identity: newIdentity(t), org: testOrg}); err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, c) // read, never answer
		})
		a := testConfig(t, testOrg)
		a.KeepaliveInterval = 20 * time.Millisecond
		a.IdleTimeout = 150 * time.Millisecond
		out, err := Dial(context.Background(), addr, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		out.Start(nil)
		if err := waitDone(t, out, 3*time.Second); !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
	})
}

func TestCloseIdempotent(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	out.Start(nil)
	in.Start(nil)
	for range 3 {
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	out.CloseWithError(errors.New("later reason"))
	select {
	case <-out.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if !errors.Is(out.Err(), ErrClosed) {
		t.Errorf("Err = %v, want ErrClosed", out.Err())
	}
	if err := out.Send([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close = %v", err)
	}
	if err := waitDone(t, in, 3*time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("peer Err = %v, want EOF", err)
	}
}

func TestCloseWithError(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	why := errors.New("roster revoked")
	out.Start(nil)
	// From inside the handler, which Close must not be called from.
	in.Start(func([]byte) { in.CloseWithError(why) })
	if err := out.Send(nil); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, in, 3*time.Second); !errors.Is(err, why) {
		t.Fatalf("Err = %v, want %v", err, why)
	}
	if err := waitDone(t, out, 3*time.Second); err == nil {
		t.Fatal("peer still up")
	}
}

func TestCloseFlushesQueuedFrames(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "unix", b), a, nil)
	// 300 frames of 1,000 bytes: well within the 1 s Close gives the
	// queue, also under the race detector on a loaded machine.
	c := newCollector(300)
	in.Start(c.handle)
	out.Start(nil)
	for i := range 300 {
		if err := out.Send(bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	out.Close()
	for i := range 300 {
		if f := c.next(t); f[0] != byte(i) {
			t.Fatalf("frame %d out of order", i)
		}
	}
}

func TestCloseUnstarted(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	out.Close()
	in.CloseWithError(nil)
	<-in.Done()
	in.Start(nil) // no effect after close
	if !errors.Is(in.Err(), ErrClosed) || !errors.Is(out.Err(), ErrClosed) {
		t.Errorf("Err = %v, %v", in.Err(), out.Err())
	}
}

// TestCloseUnstartedFlushes: a goodbye sent on a link that was never
// started still goes out on Close.
func TestCloseUnstartedFlushes(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	c := newCollector(2)
	in.Start(c.handle)
	out.Send([]byte("goodbye"))
	out.Send(make([]byte, 3*maxChunk))
	out.Close()
	if f := c.next(t); string(f) != "goodbye" {
		t.Fatalf("got %q", f)
	}
	if f := c.next(t); len(f) != 3*maxChunk {
		t.Fatalf("got %d bytes", len(f))
	}
	if err := waitDone(t, in, 3*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("peer Err = %v", err)
	}
}

func TestSessionIDsDiffer(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	ln := listen(t, "unix", b)
	o1, i1 := pair(t, ln, a, nil)
	o2, i2 := pair(t, ln, a, nil)
	if o1.SessionID() == o2.SessionID() || i1.SessionID() != o1.SessionID() || i2.SessionID() != o2.SessionID() {
		t.Error("session ids do not identify links")
	}
}

func TestSendQueueFull(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.SendQueue = 2
	out, _ := pair(t, listen(t, "tcp", b), a, nil)
	// Not started, so nothing drains the queue.
	for range 2 {
		if err := out.Send([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Send([]byte("x")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("Send = %v, want ErrQueueFull", err)
	}
	if err := out.Send(make([]byte, proto.MaxFrameSize+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Send = %v, want ErrFrameTooLarge", err)
	}
	if st := out.Stats(); st.QueueFull != 1 || st.FrameTooLarge != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestSendWaitWaitsForRoom(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.SendQueue = 1
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	if err := out.Send([]byte("first")); err != nil {
		t.Fatal(err)
	}
	// The queue is full and nothing drains it: the wait ends with ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := out.SendWait(ctx, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendWait on a full queue = %v, want the ctx deadline", err)
	}
	// Once the writer drains the queue, the frame goes out.
	got := make(chan string, 2)
	in.Start(func(f []byte) { got <- string(f) })
	errc := make(chan error, 1)
	go func() { errc <- out.SendWait(context.Background(), []byte("second")) }()
	out.Start(nil)
	if err := <-errc; err != nil {
		t.Fatalf("SendWait = %v", err)
	}
	for _, want := range []string{"first", "second"} {
		select {
		case f := <-got:
			if f != want {
				t.Fatalf("got %q, want %q", f, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q not received", want)
		}
	}
	if st := out.Stats(); st.QueueFull != 0 {
		t.Errorf("a frame that waited counted as refused: %+v", st)
	}
	// A closing link ends the wait.
	_ = out.Close()
	if err := out.SendWait(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("SendWait on a closed link = %v, want ErrClosed", err)
	}
}

func TestMaxNonceTearsDown(t *testing.T) {
	checkLeaks(t)
	t.Run("send", func(t *testing.T) {
		a, b := testConfig(t, testOrg), testConfig(t, testOrg)
		out, in := pair(t, listen(t, "tcp", b), a, nil)
		out.send.SetNonce(math.MaxUint64) // before Start: the writer owns it after
		out.Start(nil)
		in.Start(nil)
		out.Send([]byte("x"))
		if err := waitDone(t, out, 3*time.Second); !errors.Is(err, noise.ErrMaxNonce) {
			t.Fatalf("Err = %v, want ErrMaxNonce", err)
		}
	})
	t.Run("receive", func(t *testing.T) {
		a, b := testConfig(t, testOrg), testConfig(t, testOrg)
		out, in := pair(t, listen(t, "tcp", b), a, nil)
		in.recv.SetNonce(math.MaxUint64)
		out.Start(nil)
		in.Start(nil)
		out.Send([]byte("x"))
		if err := waitDone(t, in, 3*time.Second); !errors.Is(err, noise.ErrMaxNonce) {
			t.Fatalf("Err = %v, want ErrMaxNonce", err)
		}
	})
}

// TestConcurrentUse hammers one link from many goroutines while it
// closes; run it with -race.
func TestConcurrentUse(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	in.Start(func(f []byte) { in.Send(f) }) // echo
	out.Start(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := out.Send(make([]byte, i%3000))
				if errors.Is(err, ErrClosed) {
					return
				}
				_ = out.Stats()
				_ = out.LastRecv()
				_ = out.Err()
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // deliberate: the senders race the closes below for a while
	go out.CloseWithError(nil)
	out.Close()
	wg.Wait()
	if err := waitDone(t, in, 3*time.Second); err == nil {
		t.Fatal("peer still up")
	}
}

// TestGoroutinesSettle opens and closes many links and checks the
// goroutine count returns to where it started.
func TestGoroutinesSettle(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		b := testConfig(t, testOrg)
		ln, err := Listen(context.Background(), listenAddr(t, "tcp"), b)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var links []*Link
		for range 10 {
			a := testConfig(t, testOrg)
			ch := make(chan *Link, 1)
			go func() { l, _ := ln.Accept(context.Background()); ch <- l }()
			out, err := Dial(context.Background(), ln.Addr(), a, nil)
			if err != nil {
				t.Fatal(err)
			}
			in := <-ch
			c := newCollector(1)
			in.Start(c.handle)
			out.Start(nil)
			out.Send([]byte("hello"))
			c.next(t)
			links = append(links, out, in)
		}
		for _, l := range links {
			l.Close()
		}
	}()
	if !testwait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		t.Fatalf("goroutines: %d before, %d after\n%v", before, runtime.NumGoroutine(), ourGoroutines())
	}
}
