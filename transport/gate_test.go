package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

// idleFrom opens a TCP connection to ln from the loopback address src
// that sends nothing.
func idleFrom(t *testing.T, ln *Listener, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", ln.Addr().Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitStat waits until cond holds for the listener's stats.
func waitStat(t *testing.T, ln *Listener, what string, cond func(ListenerStats) bool) {
	t.Helper()
	if !testwait.Until(5*time.Second, func() bool { return cond(ln.Stats()) }) {
		t.Fatalf("%s: stats %+v", what, ln.Stats())
	}
}

// closedByPeer reports whether c was closed by the listener within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !isTimeout(err)
}

// TestListenerSourceLimit: one source gets at most MaxHandshakesPerSource
// places; the rest of its connections are closed at once, and a member
// from another address still links.
func TestListenerSourceLimit(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, testOrg)
	cfg.MaxHandshakesPerSource = 3
	cfg.FirstMessageTimeout = time.Minute
	ln := listen(t, "tcp", cfg)
	var conns []net.Conn
	for range 10 {
		conns = append(conns, idleFrom(t, ln, "127.0.0.2"))
	}
	waitStat(t, ln, "source limit", func(s ListenerStats) bool { return s.ShedSourceLimit == 7 && s.Pending == 3 })
	if !closedByPeer(conns[9], 2*time.Second) {
		t.Error("connection over the source limit left open")
	}
	if closedByPeer(conns[0], 100*time.Millisecond) {
		t.Error("connection within the source limit closed")
	}
	out, _ := pair(t, ln, testConfig(t, testOrg), nil)
	if out == nil {
		t.Fatal("no link")
	}
}

// TestListenerShedsOldestIdle: with every place taken, a new connection
// makes the listener close the oldest connection that has sent nothing,
// never one that is handshaking; with none idle, the new one is refused.
func TestListenerShedsOldestIdle(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, testOrg)
	cfg.MaxHandshakes = 4
	cfg.MaxHandshakesPerSource = 4
	cfg.FirstMessageTimeout = time.Minute
	cfg.HandshakeTimeout = time.Minute
	ln := listen(t, "tcp", cfg)

	// A connection that sent part of message 1 is not idle.
	busy := idleFrom(t, ln, "127.0.0.5")
	busy.Write([]byte{0, msg1Len, 1, 2, 3})
	waitStat(t, ln, "busy pending", func(s ListenerStats) bool { return s.Pending == 1 })
	testwait.For(t, 5*time.Second, "the listener to read the first byte", func() bool { return activePending(ln) == 1 })
	var idle []net.Conn
	for i := range 3 {
		idle = append(idle, idleFrom(t, ln, "127.0.0."+string(rune('2'+i))))
	}
	waitStat(t, ln, "full", func(s ListenerStats) bool { return s.Pending == 4 })

	// A member links: the oldest idle connection makes room.
	out, _ := pair(t, ln, testConfig(t, testOrg), nil)
	if out == nil {
		t.Fatal("no link")
	}
	if s := ln.Stats(); s.ShedIdle != 1 {
		t.Fatalf("stats %+v, want one idle shed", s)
	}
	if !closedByPeer(idle[0], 2*time.Second) {
		t.Error("oldest idle connection not shed")
	}
	if closedByPeer(busy, 100*time.Millisecond) {
		t.Error("handshaking connection shed")
	}
}

// TestListenerFirstMessageTimeout: a connection that sends nothing is
// closed after FirstMessageTimeout, well before HandshakeTimeout, and
// counted.
func TestListenerFirstMessageTimeout(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, testOrg)
	cfg.FirstMessageTimeout = 200 * time.Millisecond
	cfg.HandshakeTimeout = time.Minute
	ln, rec := listenRec(t, "tcp", cfg)
	c := idleFrom(t, ln, "127.0.0.1")
	start := time.Now()
	err := rec.next(t)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("logged %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
	if !closedByPeer(c, 2*time.Second) {
		t.Fatal("idle connection left open")
	}
	waitStat(t, ln, "counted", func(s ListenerStats) bool { return s.FirstMessageTimeout == 1 && s.Pending == 0 })
}

// TestListenerRefusedSendsFrames: a peer Admit refuses gets the frames
// Refused sends, then the connection closes.
func TestListenerRefusedSendsFrames(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, testOrg)
	errNo := errors.New("not on the list")
	cfg.Admit = func(*proto.HandshakePayload) error { return errNo }
	cfg.Refused = func(l *Link, err error) {
		if !errors.Is(err, ErrNotAdmitted) || !errors.Is(err, errNo) {
			t.Errorf("Refused got %v", err)
		}
		l.Send([]byte("why"))
	}
	ln := listen(t, "tcp", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := Dial(ctx, ln.Addr(), testConfig(t, testOrg), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(4)
	out.Start(c.handle)
	if f := c.next(t); string(f) != "why" {
		t.Fatalf("got %q", f)
	}
	waitDone(t, out, 5*time.Second)
}

// TestListenerShedsStalled: with every place taken by connections that
// sent message 1 and then stalled, a new connection makes the listener
// close the oldest one that has run for over a second.
func TestListenerShedsStalled(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, testOrg)
	cfg.MaxHandshakes = 2
	cfg.MaxHandshakesPerSource = 4
	cfg.HandshakeTimeout = time.Minute
	ln := listen(t, "tcp", cfg)
	msg1 := append([]byte{0, msg1Len}, make([]byte, msg1Len)...)
	msg1[2] = 9 // any 32 bytes are an X25519 public key
	var stalled []net.Conn
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		c := idleFrom(t, ln, src)
		c.Write(msg1)
		stalled = append(stalled, c)
	}
	waitStat(t, ln, "full", func(s ListenerStats) bool { return s.Pending == 2 })
	// Until the listener has read their first bytes, the two count as
	// idle, and a newcomer would rightly shed one.
	testwait.For(t, 5*time.Second, "the listener to read message 1 of the two handshakes", func() bool { return activePending(ln) >= 2 })
	// Before a second has passed, a newcomer finds no place.
	if c := idleFrom(t, ln, "127.0.0.4"); !closedByPeer(c, 2*time.Second) {
		t.Fatal("newcomer got a place next to fresh handshakes")
	}
	time.Sleep(stallAfter) // deliberate: the two handshakes become stalled
	out, _ := pair(t, ln, testConfig(t, testOrg), nil)
	if out == nil {
		t.Fatal("no link")
	}
	if s := ln.Stats(); s.ShedStalled != 1 || s.ShedFull != 1 {
		t.Fatalf("stats %+v, want one stalled shed and one refused", s)
	}
	if !closedByPeer(stalled[0], 2*time.Second) {
		t.Error("oldest stalled handshake not shed")
	}
}

// activePending counts the connections in ln's gate that have sent a
// byte.
func activePending(ln *Listener) int {
	ln.gate.mu.Lock()
	defer ln.gate.mu.Unlock()
	n := 0
	for e := ln.gate.order.Front(); e != nil; e = e.Next() {
		if e.Value.(*pendingConn).active.Load() {
			n++
		}
	}
	return n
}

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestSourceOf: IPv4 sources are addresses, IPv6 sources /64 prefixes,
// Unix peers one unlimited source.
func TestSourceOf(t *testing.T) {
	t.Parallel()
	tcp := func(s string) net.Conn { return addrConn{remote: &net.TCPAddr{IP: net.ParseIP(s), Port: 1}} }
	for _, tc := range []struct {
		conn    net.Conn
		src     string
		limited bool
	}{
		{tcp("192.0.2.7"), "192.0.2.7", true},
		{tcp("::ffff:192.0.2.7"), "192.0.2.7", true},
		{tcp("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64", true},
		{tcp("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64", true},
		{addrConn{remote: &net.UnixAddr{Name: "", Net: "unix"}}, "local", false},
	} {
		src, limited := sourceOf(tc.conn)
		if src != tc.src || limited != tc.limited {
			t.Errorf("%v: %q %v, want %q %v", tc.conn.RemoteAddr(), src, limited, tc.src, tc.limited)
		}
	}
}
