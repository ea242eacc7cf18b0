package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshd/meshd/transport/logrl"
)

// Listener accepts links. Handshakes run concurrently in goroutines the
// listener owns. Unauthenticated connections are limited per source
// (Config.MaxHandshakesPerSource) and in all (Config.MaxHandshakes, the
// oldest idle one shed first), and must deliver message 1 within
// Config.FirstMessageTimeout, so hostile or broken peers cannot keep
// members from linking.
type Listener struct {
	ln   net.Listener
	ep   *endpoint
	addr Addr

	ctx    context.Context // cancelled by Close; bounds handshakes
	cancel context.CancelFunc
	gate   *gate // unauthenticated connections and undelivered links
	links  chan *Link
	logs   *logrl.Limiter // handshake failures, per source and reason

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	failed    chan struct{} // closed when the accept loop stops on an error
	failErr   error         // written before failed is closed
	wg        sync.WaitGroup

	accepted, rejected, firstTimeout atomic.Uint64
}

// ListenerStats is a snapshot of a listener's counters.
type ListenerStats struct {
	Accepted uint64 // handshakes that produced a link
	Failed   uint64 // handshakes that failed (logged, rate-limited per source and reason)
	// ShedSourceLimit counts connections closed at once because their
	// source had MaxHandshakesPerSource handshakes in progress.
	ShedSourceLimit uint64
	// ShedIdle counts idle connections (nothing sent yet) closed to make
	// room for a new one when MaxHandshakes were pending.
	ShedIdle uint64
	// ShedStalled counts handshakes closed, when MaxHandshakes were
	// pending and none was idle, because they had run for over a second.
	ShedStalled uint64
	// ShedFull counts connections refused because MaxHandshakes were
	// pending and none was idle or stalled.
	ShedFull uint64
	// FirstMessageTimeout counts connections closed because message 1
	// did not arrive within FirstMessageTimeout.
	FirstMessageTimeout uint64
	// Pending is the number of connections in handshake or waiting for
	// Accept now.
	Pending int
}

// Listen listens on addr and starts accepting links. ctx bounds only the
// setup; close the listener to stop it. For a Unix socket, an existing
// socket file is removed only if nothing answers on it, and the new one has
// mode 0600 (only this user's meshd processes may connect; the handshake
// authenticates them anyway).
func Listen(ctx context.Context, addr Addr, cfg Config) (*Listener, error) {
	if err := addr.check(); err != nil {
		return nil, err
	}
	ep, err := newEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := ep.listen(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	bound := Addr{Network: addr.Network, Address: ln.Addr().String()}
	if addr.Network == "unix" {
		bound.Address = addr.Address
	}
	hctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		ln:      ln,
		ep:      ep,
		addr:    bound,
		ctx:     hctx,
		cancel:  cancel,
		gate:    newGate(ep.cfg.MaxHandshakes, ep.cfg.MaxHandshakesPerSource),
		links:   make(chan *Link),
		logs:    logrl.New(0, 0),
		closing: make(chan struct{}),
		failed:  make(chan struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// listen opens the listener of addr on the configured network, or on the
// host's: a Unix socket replaces a stale socket file and gets mode 0600.
func (e *endpoint) listen(ctx context.Context, addr Addr) (net.Listener, error) {
	if e.cfg.Net != nil {
		return e.cfg.Net.Listen(ctx, addr)
	}
	if addr.Network == "unix" {
		if err := removeStaleSocket(ctx, addr.Address); err != nil {
			return nil, err
		}
	}
	lc := net.ListenConfig{KeepAliveConfig: tcpKeepAlive, Control: setDeadAfter}
	ln, err := lc.Listen(ctx, addr.Network, addr.Address)
	if err != nil {
		return nil, err
	}
	if addr.Network == "unix" {
		if err := os.Chmod(addr.Address, 0o600); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return ln, nil
}

// removeStaleSocket removes path if it is a socket nobody listens on. It
// refuses to touch anything else.
func removeStaleSocket(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s is in use by a running process", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot tell whether %s is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// Addr returns the bound address, with the actual port for tcp port 0.
func (l *Listener) Addr() Addr { return l.addr }

// Stats returns a snapshot of the listener's counters.
func (l *Listener) Stats() ListenerStats {
	return ListenerStats{
		Accepted:            l.accepted.Load(),
		Failed:              l.rejected.Load(),
		ShedSourceLimit:     l.gate.shedSource.Load(),
		ShedIdle:            l.gate.shedIdle.Load(),
		ShedStalled:         l.gate.shedStalled.Load(),
		ShedFull:            l.gate.shedFull.Load(),
		FirstMessageTimeout: l.firstTimeout.Load(),
		Pending:             l.gate.pending(),
	}
}

// Accept returns the next link whose handshake succeeded, not yet started.
// It returns [ErrClosed] once the listener is closed.
func (l *Listener) Accept(ctx context.Context) (*Link, error) {
	select {
	case link := <-l.links:
		return link, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closing:
		return nil, ErrClosed
	case <-l.failed:
		return nil, fmt.Errorf("accept on %s: %w", l.addr, l.failErr)
	}
}

// Close stops accepting, aborts running handshakes, closes links not yet
// returned by Accept, and waits for the listener's goroutines. Links
// already returned are not affected. Close is idempotent.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closing)
		l.cancel()
		l.closeErr = l.ln.Close()
		l.wg.Wait()
	})
	return l.closeErr
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	var delay time.Duration
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				select {
				case <-l.closing:
				default:
					l.failErr = err
					close(l.failed)
				}
				return
			}
			// Anything else (out of file descriptors, an aborted
			// connection) is likely transient: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.ep.cfg.Logger.Warn("accept failed; retrying", "addr", l.addr.String(), "err", err, "delay", delay)
			select {
			case <-time.After(delay):
				continue
			case <-l.closing:
				return
			}
		}
		delay = 0
		pc, shed := l.gate.admit(conn, time.Now())
		if shed != nil {
			// The goroutine serving the shed connection sees its reads
			// fail and returns.
			shed.conn.Close()
		}
		if pc == nil {
			conn.Close()
			l.logShed()
			continue
		}
		l.wg.Add(1)
		go l.serve(pc)
	}
}

// serve runs one responder handshake and hands the link to Accept. The
// connection keeps its place in the gate until the link is delivered, so
// links nobody accepts also count against MaxHandshakes. Nothing costly
// happens before message 1 has arrived in full, within
// FirstMessageTimeout: until then the connection is idle and the first
// to be shed.
func (l *Listener) serve(pc *pendingConn) {
	defer l.wg.Done()
	defer l.gate.release(pc)
	conn := pc.conn
	remote := conn.RemoteAddr().String()
	start := time.Now()
	br := bufio.NewReaderSize(conn, readBufferSize)
	err := l.awaitFirstMessage(pc, br)
	var link *Link
	if err == nil {
		link, err = l.ep.serverBuffered(l.ctx, conn, br)
	} else {
		conn.Close()
	}
	if err == nil {
		pc.done.Store(true)
		if pc.shed.Load() {
			// Shed as stalled just as it finished: its conn is closed.
			link.Close()
			err = fmt.Errorf("%w: shed while waiting for a place", ErrHandshake)
		}
	}
	if err != nil {
		l.rejected.Add(1)
		if pc.shed.Load() {
			// Counted as shed, and logged in one line per interval.
			l.logShed()
			return
		}
		key := pc.src + "|" + reason(err)
		if ok, suppressed := l.logs.Allow(key, time.Now()); ok {
			args := []any{"addr", l.addr.String(), "remote", remote, "err", err,
				"reason", reason(err), "elapsed", time.Since(start)}
			if suppressed > 0 {
				args = append(args, "suppressed", suppressed)
			}
			l.ep.cfg.Logger.Info("handshake failed", args...)
		}
		return
	}
	select {
	case l.links <- link:
		l.accepted.Add(1)
	case <-l.closing:
		link.Close()
	}
}

// awaitFirstMessage waits, within FirstMessageTimeout, until message 1
// (its length prefix and 32 bytes) is buffered. The first byte marks the
// connection as no longer idle.
func (l *Listener) awaitFirstMessage(pc *pendingConn, br *bufio.Reader) error {
	conn := pc.conn
	stop := context.AfterFunc(l.ctx, func() { _ = conn.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	if err := conn.SetReadDeadline(time.Now().Add(l.ep.cfg.FirstMessageTimeout)); err != nil {
		return fmt.Errorf("%w: message 1: %w", ErrHandshake, err)
	}
	if l.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, context.Cause(l.ctx))
	}
	_, err := br.Peek(1)
	if err == nil {
		pc.active.Store(true)
		var hdr []byte
		if hdr, err = br.Peek(2); err == nil {
			n := int(binary.BigEndian.Uint16(hdr))
			if n != msg1Len && (n != knockMsg1Len || !l.ep.cfg.AnswerKnocks) {
				return fmt.Errorf("%w: message 1: %w: %d bytes, want %d", ErrHandshake, ErrProtocol, n, msg1Len)
			}
			_, err = br.Peek(2 + n)
		}
	}
	switch {
	case err == nil:
		return nil
	case l.ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrHandshake, context.Cause(l.ctx))
	case errors.Is(err, os.ErrDeadlineExceeded):
		l.firstTimeout.Add(1)
		return fmt.Errorf("%w: message 1: %w: not received within %v", ErrHandshake, ErrTimeout, l.ep.cfg.FirstMessageTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: message 1: connection closed by peer: %w", ErrHandshake, err)
	}
	return fmt.Errorf("%w: message 1: %w", ErrHandshake, err)
}

// logShed logs shed connections at most once per log interval, with the
// counts so far.
func (l *Listener) logShed() {
	if ok, suppressed := l.logs.Allow("|shed", time.Now()); ok {
		st := l.Stats()
		l.ep.cfg.Logger.Warn("unauthenticated connections shed",
			"addr", l.addr.String(), "source_limit", st.ShedSourceLimit,
			"idle", st.ShedIdle, "stalled", st.ShedStalled, "full", st.ShedFull, "suppressed", suppressed)
	}
}

// reason names the class of a handshake failure, for logs and metrics.
func reason(err error) string {
	switch {
	case errors.Is(err, ErrNotAdmitted):
		return "not-admitted"
	case errors.Is(err, ErrIdentityBinding):
		return "identity-binding"
	case errors.Is(err, ErrWrongOrg):
		return "wrong-org"
	case errors.Is(err, ErrUnexpectedPeer):
		return "unexpected-peer"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, ErrProtocol):
		return "protocol"
	}
	return "io"
}
