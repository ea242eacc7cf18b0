package transport

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

const testOrg = "acme"

// checkLeaks fails the test if goroutines started by this package (or by
// the test's helpers) are still running shortly after the test ends.
// Tests that use it must not run in parallel.
func checkLeaks(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		var leaked []string
		if !testwait.Until(5*time.Second, func() bool { leaked = ourGoroutines(); return len(leaked) == 0 }) {
			t.Errorf("%d goroutines leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

func ourGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "meshd/meshd/transport.") ||
			strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "testing.(*T).Run") ||
			strings.Contains(g, "transport.ourGoroutines") {
			continue
		}
		out = append(out, g)
	}
	return out
}

// recorder is a slog handler that keeps the "err" attribute of every
// record, so tests can check why a listener refused a handshake.
type recorder struct {
	mu   sync.Mutex
	errs []error
	ch   chan error
}

func newRecorder() *recorder { return &recorder{ch: make(chan error, 64)} }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "handshake failed" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			if err, ok := a.Value.Any().(error); ok {
				r.mu.Lock()
				r.errs = append(r.errs, err)
				r.mu.Unlock()
				select {
				case r.ch <- err:
				default:
				}
			}
		}
		return true
	})
	return nil
}

// next waits for the next logged handshake failure.
func (r *recorder) next(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no handshake failure logged")
		return nil
	}
}

func newIdentity(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func testConfig(t testing.TB, org string) Config {
	cfg := DefaultConfig()
	cfg.Identity = newIdentity(t)
	cfg.Org = org
	cfg.HandshakeTimeout = 3 * time.Second
	return cfg
}

func keyOf(cfg Config) proto.PubKey { return proto.PubKeyOf(cfg.Identity) }

// testDir returns a directory short enough for a Unix socket path.
func testDir(t testing.TB) string {
	d := t.TempDir()
	if len(d) < 80 {
		return d
	}
	d, err := os.MkdirTemp("", "tr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func listenAddr(t testing.TB, network string) Addr {
	if network == "unix" {
		return Addr{Network: "unix", Address: filepath.Join(testDir(t), "l.sock")}
	}
	return Addr{Network: "tcp", Address: "127.0.0.1:0"}
}

func listen(t testing.TB, network string, cfg Config) *Listener {
	t.Helper()
	ln, err := Listen(context.Background(), listenAddr(t, network), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// pair returns a dialed link and the link the listener accepted for it.
func pair(t testing.TB, ln *Listener, dialCfg Config, expect *proto.PubKey) (out, in *Link) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type res struct {
		l   *Link
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := ln.Accept(ctx)
		ch <- res{l, err}
	}()
	out, err := Dial(ctx, ln.Addr(), dialCfg, expect)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		out.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { out.Close(); r.l.Close() })
	return out, r.l
}

// collector gathers frames from a link's handler.
type collector struct {
	ch chan []byte
}

func newCollector(n int) *collector { return &collector{ch: make(chan []byte, n)} }

func (c *collector) handle(f []byte) { c.ch <- f }

func (c *collector) next(t testing.TB) []byte {
	t.Helper()
	select {
	case f := <-c.ch:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a frame")
		return nil
	}
}

func waitDone(t testing.TB, l *Link, within time.Duration) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(within):
		t.Fatalf("link still up after %v", within)
		return nil
	}
}

// rawOpts crafts a misbehaving peer with flynn/noise directly.
type rawOpts struct {
	identity   ed25519.PrivateKey
	org        string                                 // prologue org
	payloadOrg string                                 // payload org; defaults to org
	bindOther  bool                                   // sign some other static key
	payload    func(p *proto.HandshakePayload) []byte // replaces the encoded payload
}

// rawPeer is one side of a hand-driven Noise session.
type rawPeer struct {
	conn       net.Conn
	br         *bufio.Reader
	send, recv *noise.CipherState
	peer       []byte // the payload we received
}

func (o rawOpts) encodedPayload(t testing.TB, static []byte) []byte {
	p := proto.HandshakePayload{Version: proto.ProtocolVersion, Org: o.payloadOrg}
	if p.Org == "" {
		p.Org = o.org
	}
	if o.bindOther {
		other, _ := NewStaticKey()
		p.BindStatic(o.identity, other.Public())
	} else {
		p.BindStatic(o.identity, static)
	}
	if o.payload != nil {
		return o.payload(&p)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (o rawOpts) state(t testing.TB, initiator bool) (*noise.HandshakeState, noise.DHKey) {
	key, err := cipherSuite.GenerateKeypair(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := noise.NewHandshakeState(noise.Config{
		CipherSuite: cipherSuite, Pattern: noise.HandshakeXX, Initiator: initiator,
		Prologue: proto.Prologue(o.org), StaticKeypair: key,
	})
	if err != nil {
		t.Fatal(err)
	}
	return hs, key
}

func writeRecord(w io.Writer, msg []byte) error {
	rec, err := appendRecord(nil, msg)
	if err != nil {
		return err
	}
	_, err = w.Write(rec)
	return err
}

// rawInitiate runs the initiator side by hand on conn.
func rawInitiate(t testing.TB, conn net.Conn, o rawOpts) (*rawPeer, error) {
	hs, key := o.state(t, true)
	rp := &rawPeer{conn: conn, br: bufio.NewReader(conn)}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	m1, _, _, _ := hs.WriteMessage(nil, nil)
	if err := writeRecord(conn, m1); err != nil {
		return nil, err
	}
	m2, err := readRecord(rp.br, make([]byte, maxRecord))
	if err != nil {
		return nil, err
	}
	if rp.peer, _, _, err = hs.ReadMessage(nil, m2); err != nil {
		return nil, err
	}
	m3, send, recv, err := hs.WriteMessage(nil, o.encodedPayload(t, key.Public))
	if err != nil {
		return nil, err
	}
	rp.send, rp.recv = send, recv
	return rp, writeRecord(conn, m3)
}

// rawRespond runs the responder side by hand on conn.
func rawRespond(t testing.TB, conn net.Conn, o rawOpts) (*rawPeer, error) {
	hs, key := o.state(t, false)
	rp := &rawPeer{conn: conn, br: bufio.NewReader(conn)}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	m1, err := readRecord(rp.br, make([]byte, maxRecord))
	if err != nil {
		return nil, err
	}
	if _, _, _, err = hs.ReadMessage(nil, m1); err != nil {
		return nil, err
	}
	m2, _, _, err := hs.WriteMessage(nil, o.encodedPayload(t, key.Public))
	if err != nil {
		return nil, err
	}
	if err := writeRecord(conn, m2); err != nil {
		return nil, err
	}
	m3, err := readRecord(rp.br, make([]byte, maxRecord))
	if err != nil {
		return nil, err
	}
	var recv, send *noise.CipherState
	if rp.peer, recv, send, err = hs.ReadMessage(nil, m3); err != nil {
		return nil, err
	}
	rp.send, rp.recv = send, recv
	return rp, nil
}

// sendMsg encrypts one transport plaintext (header + body) and writes it.
func (rp *rawPeer) sendMsg(header byte, body []byte) error {
	pt := append([]byte{header}, body...)
	ct, err := rp.send.Encrypt(nil, nil, pt)
	if err != nil {
		return err
	}
	return writeRecord(rp.conn, ct)
}

// rawDialer connects to ln and runs a crafted initiator.
func rawDialer(t testing.TB, ln *Listener, o rawOpts) *rawPeer {
	t.Helper()
	conn, err := net.Dial(ln.Addr().Network, ln.Addr().Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rp, err := rawInitiate(t, conn, o)
	if err != nil {
		t.Fatalf("raw handshake: %v", err)
	}
	return rp
}

// rawServer accepts one connection on a plain TCP listener and runs fn on
// it. It returns the address and waits for fn in cleanup.
func rawServer(t testing.TB, fn func(net.Conn)) Addr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		fn(conn)
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return Addr{Network: "tcp", Address: ln.Addr().String()}
}

// proxy forwards TCP connections to target, record by record, and can
// flip a bit in one record. Direction 0 is client to server.
type proxy struct {
	ln        net.Listener
	target    Addr
	tamperDir int
	tamperIdx int // record index in tamperDir to alter; -1 for none
	upBytes   atomic.Int64
	wg        sync.WaitGroup
}

func newProxy(t testing.TB, target Addr, dir, idx int) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, tamperDir: dir, tamperIdx: idx}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *proxy) addr() Addr { return Addr{Network: "tcp", Address: p.ln.Addr().String()} }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial(p.target.Network, p.target.Address)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go p.pump(c, s, 0)
		go p.pump(s, c, 1)
	}
}

func (p *proxy) pump(from, to net.Conn, dir int) {
	defer p.wg.Done()
	defer from.Close()
	defer to.Close()
	buf := make([]byte, maxRecord)
	for i := 0; ; i++ {
		rec, err := readRecord(from, buf)
		if err != nil {
			return
		}
		if dir == p.tamperDir && i == p.tamperIdx {
			rec[len(rec)-1] ^= 0x01
		}
		if dir == 0 {
			p.upBytes.Add(int64(2 + len(rec)))
		}
		if writeRecord(to, rec) != nil {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pipePair runs a handshake over net.Pipe, dialler a, listener b, and
// returns both links, not started. The pipe is unbuffered: a writer
// blocks until the peer reads.
func pipePair(t testing.TB, a, b Config) (out, in *Link) {
	t.Helper()
	c1, c2 := net.Pipe()
	ctx := context.Background()
	ch := make(chan *Link, 1)
	go func() {
		l, err := Server(ctx, c2, b)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	out, err := Client(ctx, c1, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in = <-ch; in == nil {
		t.FailNow()
	}
	return out, in
}
