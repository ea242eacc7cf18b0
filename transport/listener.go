package transport

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Listener accepts links. Handshakes run concurrently in goroutines the
// listener owns, at most Config.MaxHandshakes at once, so a slow or hostile
// peer holds up only its own handshake.
type Listener struct {
	ln   net.Listener
	ep   *endpoint
	addr Addr

	ctx    context.Context // cancelled by Close; bounds handshakes
	cancel context.CancelFunc
	sem    chan struct{} // one token per running handshake or undelivered link
	links  chan *Link

	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	failed    chan struct{} // closed when the accept loop stops on an error
	failErr   error         // written before failed is closed
	wg        sync.WaitGroup

	accepted, rejected atomic.Uint64
}

// ListenerStats is a snapshot of a listener's counters.
type ListenerStats struct {
	Accepted uint64 // handshakes that produced a link
	Failed   uint64 // handshakes that failed (each one is logged)
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
	if addr.Network == "unix" {
		if err := removeStaleSocket(ctx, addr.Address); err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, addr.Network, addr.Address)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	bound := Addr{Network: addr.Network, Address: ln.Addr().String()}
	if addr.Network == "unix" {
		bound.Address = addr.Address
		if err := os.Chmod(addr.Address, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
	}
	hctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		ln:      ln,
		ep:      ep,
		addr:    bound,
		ctx:     hctx,
		cancel:  cancel,
		sem:     make(chan struct{}, ep.cfg.MaxHandshakes),
		links:   make(chan *Link),
		closing: make(chan struct{}),
		failed:  make(chan struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
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
	return ListenerStats{Accepted: l.accepted.Load(), Failed: l.rejected.Load()}
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
		select {
		case l.sem <- struct{}{}:
		case <-l.closing:
			return
		}
		conn, err := l.ln.Accept()
		if err != nil {
			<-l.sem
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
		l.wg.Add(1)
		go l.serve(conn)
	}
}

// serve runs one responder handshake and hands the link to Accept. It
// holds its semaphore token until the link is delivered, so links nobody
// accepts also count against MaxHandshakes.
func (l *Listener) serve(conn net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	remote := conn.RemoteAddr().String()
	start := time.Now()
	link, err := l.ep.server(l.ctx, conn)
	if err != nil {
		l.rejected.Add(1)
		l.ep.cfg.Logger.Info("handshake failed",
			"addr", l.addr.String(), "remote", remote, "err", err,
			"reason", reason(err), "elapsed", time.Since(start))
		return
	}
	select {
	case l.links <- link:
		l.accepted.Add(1)
	case <-l.closing:
		link.Close()
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
