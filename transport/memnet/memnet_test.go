package memnet_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/memnet"
)

var (
	ipA = netip.MustParseAddr("192.0.2.1")
	ipB = netip.MustParseAddr("192.0.2.2")
)

func mustAddr(t *testing.T, s string) transport.Addr {
	t.Helper()
	a, err := transport.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pair dials from host a to a listener of host b and returns both ends.
func pair(t *testing.T, nw *memnet.Network) (client, server net.Conn) {
	t.Helper()
	ln, err := nw.Host(ipB).Listen(context.Background(), mustAddr(t, "tcp://:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err = nw.Host(ipA).Dial(context.Background(), mustAddr(t, "tcp://"+ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// TestAddresses: a listener on the unspecified address is bound to its
// host's IP with a port of its own; each end names the other, as TCP's
// do, and a Unix socket belongs to the host that listens on it.
func TestAddresses(t *testing.T) {
	nw := memnet.New()
	c, s := pair(t, nw)
	if c.LocalAddr().Network() != "tcp" || s.LocalAddr().Network() != "tcp" {
		t.Fatalf("networks %s, %s", c.LocalAddr().Network(), s.LocalAddr().Network())
	}
	if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != ipB {
		t.Fatalf("client's remote %v, want host B", c.RemoteAddr())
	}
	if s.RemoteAddr().String() != c.LocalAddr().String() || s.LocalAddr().String() != c.RemoteAddr().String() {
		t.Fatalf("ends disagree: %v-%v and %v-%v", c.LocalAddr(), c.RemoteAddr(), s.LocalAddr(), s.RemoteAddr())
	}
	ctx := context.Background()
	sock := mustAddr(t, "unix:///run/meshd/link.sock")
	ln, err := nw.Host(ipA).Listen(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := nw.Host(ipA).Listen(ctx, sock); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listen on the socket: %v", err)
	}
	if _, err := nw.Host(ipB).Dial(ctx, sock); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("another host dialled the socket: %v", err)
	}
	uc, err := nw.Host(ipA).Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	uc.Close()
	if _, err := nw.Host(ipA).Listen(ctx, mustAddr(t, "tcp://192.0.2.9:1")); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("listen on another host's address: %v", err)
	}
}

// TestRefusedAndClosed: a dial to an address nobody listens on is
// refused at once; a closed listener's Accept fails with net.ErrClosed
// and frees its address.
func TestRefusedAndClosed(t *testing.T) {
	nw := memnet.New()
	ctx := context.Background()
	a := mustAddr(t, "tcp://192.0.2.2:7000")
	if _, err := nw.Host(ipA).Dial(ctx, a); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to nothing: %v", err)
	}
	ln, err := nw.Host(ipB).Listen(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nw.Host(ipA).Dial(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read of a connection never accepted: %v, want EOF", err)
	}
	if _, err := nw.Host(ipA).Dial(ctx, a); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the listener closed: %v", err)
	}
	if ln, err = nw.Host(ipB).Listen(ctx, a); err != nil {
		t.Fatalf("the address was not freed: %v", err)
	}
	ln.Close()
}

// TestBufferedWrites: a write returns before the peer reads while it
// fits the buffer; past it, the writer waits for the reader; the peer
// reads every byte written before a close, then EOF, and its writes then
// fail.
func TestBufferedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := pair(t, memnet.New())
		small := bytes.Repeat([]byte{1}, 1000)
		if n, err := c.Write(small); n != len(small) || err != nil {
			t.Fatalf("write within the buffer: %d, %v", n, err)
		}
		big := bytes.Repeat([]byte{2}, 3*memnet.DefaultBuffer)
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(big)
			wrote <- err
		}()
		synctest.Wait()
		select {
		case err := <-wrote:
			t.Fatalf("a write of three buffers returned (%v) with nothing read", err)
		default:
		}
		got := make([]byte, 0, len(small)+len(big))
		buf := make([]byte, 50_000)
		for len(got) < cap(got) {
			n, err := s.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(small, big...)) {
			t.Fatal("the bytes read differ from those written")
		}
		c.Write([]byte("bye"))
		c.Close()
		if b, err := io.ReadAll(s); string(b) != "bye" || err != nil {
			t.Fatalf("after the peer's close: %q, %v", b, err)
		}
		if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("write to a closed peer: %v", err)
		}
		if _, err := c.Read(buf); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read of a closed end: %v", err)
		}
	})
}

// TestDeadlines: reads and writes fail with os.ErrDeadlineExceeded at
// their deadline, on the bubble's clock, to the nanosecond; a deadline
// in the past fails a read even with bytes waiting; moving a deadline
// away lets the next call wait again.
func TestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := pair(t, memnet.New())
		start := time.Now()
		s.SetReadDeadline(start.Add(3 * time.Second))
		_, err := s.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past its deadline: %v", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("read deadline fired after %v, want 3s", d)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("deadline error %v is not a timeout", err)
		}
		c.Write([]byte("x"))
		s.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read with a past deadline and a byte waiting: %v", err)
		}
		s.SetReadDeadline(time.Time{})
		if n, err := s.Read(make([]byte, 1)); n != 1 || err != nil {
			t.Fatalf("read after the deadline was cleared: %d, %v", n, err)
		}
		c.Write(make([]byte, memnet.DefaultBuffer))
		start = time.Now()
		c.SetWriteDeadline(start.Add(time.Minute))
		n, err := c.Write([]byte("more"))
		if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Minute {
			t.Fatalf("write to a full buffer: %d, %v after %v", n, err, time.Since(start))
		}
	})
}

// TestLinkOverMemnet: transport.Listen and Dial run their handshake and
// a link over the network of Config.Net, inside a bubble, with the
// link's addresses those of the memory hosts.
func TestLinkOverMemnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		srv, cli := linkConfig(t, nw.Host(ipB)), linkConfig(t, nw.Host(ipA))
		ctx := context.Background()
		ln, err := transport.Listen(ctx, mustAddr(t, "tcp://:7000"), srv)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if got := ln.Addr().String(); got != "tcp://192.0.2.2:7000" {
			t.Fatalf("bound to %s", got)
		}
		out, err := transport.Dial(ctx, ln.Addr(), cli, nil)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		in.Start(func(f []byte) { got <- append([]byte(nil), f...) })
		out.Start(nil)
		if err := out.Send([]byte{9, 1, 2}); err != nil {
			t.Fatal(err)
		}
		if f := <-got; !bytes.Equal(f, []byte{9, 1, 2}) {
			t.Fatalf("frame %x", f)
		}
		if in.Network() != "tcp" || in.RemoteAddr() != out.LocalAddr() {
			t.Fatalf("inbound link %s from %s; outbound from %s", in.Network(), in.RemoteAddr(), out.LocalAddr())
		}
		out.Close()
		<-in.Done()
		if _, err := transport.Dial(ctx, mustAddr(t, "tcp://192.0.2.3:7000"), cli, nil); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial to nothing: %v", err)
		}
	})
}

// TestCut: across a cut, nothing written arrives and a close is not
// seen, a read waits out its deadline, and a dial waits out its context;
// once healed, what was written arrives, then the close. Connections of
// a host with itself are not cut.
func TestCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		c, s := pair(t, nw)
		nw.Cut(ipA, ipB)
		if n, err := c.Write([]byte("lost for now")); n != 12 || err != nil {
			t.Fatalf("write across the cut: %d, %v", n, err)
		}
		c.Close()
		start := time.Now()
		s.SetReadDeadline(start.Add(time.Minute))
		if _, err := s.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Minute {
			t.Fatalf("read across the cut: %v after %v", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start = time.Now()
		if _, err := nw.Host(ipA).Dial(ctx, mustAddr(t, "tcp://"+s.LocalAddr().String())); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("dial across the cut: %v after %v", err, time.Since(start))
		}
		ln, err := nw.Host(ipA).Listen(context.Background(), mustAddr(t, "tcp://127.0.0.1:80"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if lc, err := nw.Host(ipA).Dial(context.Background(), mustAddr(t, "tcp://127.0.0.1:80")); err != nil {
			t.Fatalf("loopback dial on a cut host: %v", err)
		} else {
			lc.Close()
		}

		nw.Heal(ipA, ipB)
		s.SetReadDeadline(time.Time{})
		if b, err := io.ReadAll(s); string(b) != "lost for now" || err != nil {
			t.Fatalf("after the heal: %q, %v", b, err)
		}
	})
}
