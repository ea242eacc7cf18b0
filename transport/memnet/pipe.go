package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultBuffer is the bytes a connection holds in each direction that
// the reader has not read yet: what a loopback TCP socket's buffers hold
// by default (about 128 KiB each way, send and receive together), so a
// writer runs ahead of a busy reader by as much as it would on a socket,
// and blocks, like one, past it.
const DefaultBuffer = 128 << 10

// pipe is one direction of a connection: the bytes written and not yet
// read, up to size. Every change of state closes changed and makes a new
// one, waking whoever waits on it (a reader, a writer) to look again:
// blocking on a channel made in a synctest bubble is what lets the
// bubble's clock run.
type pipe struct {
	way     *path // nil: a way no Cut breaks
	mu      sync.Mutex
	buf     []byte
	size    int
	eof     bool // the writing end closed: reads return EOF once buf is empty
	broken  bool // the reading end closed: writes fail, buf is dropped
	changed chan struct{}
}

func newPipe(size int, way *path) *pipe {
	return &pipe{way: way, size: size, changed: make(chan struct{})}
}

// signalLocked wakes the waiters; the caller holds mu.
func (p *pipe) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pipe) closeWrite() {
	p.mu.Lock()
	p.eof = true
	p.signalLocked()
	p.mu.Unlock()
}

func (p *pipe) closeRead() {
	p.mu.Lock()
	p.broken = true
	p.buf = nil
	p.signalLocked()
	p.mu.Unlock()
}

// conn is one end of a connection: it reads from in and writes to out.
type conn struct {
	in, out       *pipe
	local, remote net.Addr
	rd, wd        deadline
	closeOnce     sync.Once
	closed        chan struct{}
}

var _ net.Conn = (*conn)(nil)

// newConn returns the two ends of a connection holding size bytes each
// way, over way (nil: never cut); a's local address is aAddr, b's is
// bAddr.
func newConn(aAddr, bAddr net.Addr, size int, way *path) (a, b *conn) {
	ab, ba := newPipe(size, way), newPipe(size, way)
	a = &conn{in: ba, out: ab, local: aAddr, remote: bAddr, closed: make(chan struct{})}
	b = &conn{in: ab, out: ba, local: bAddr, remote: aAddr, closed: make(chan struct{})}
	a.rd.init()
	a.wd.init()
	b.rd.init()
	b.wd.init()
	return a, b
}

func (c *conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.local.Network(), Source: c.local, Addr: c.remote, Err: err}
}

// Read reads what the peer wrote, waiting for it until the read
// deadline; past a deadline it fails even with bytes waiting, as a
// socket does.
func (c *conn) Read(b []byte) (int, error) {
	p := c.in
	for {
		select {
		case <-c.closed:
			return 0, c.opError("read", net.ErrClosed)
		case <-c.rd.wait():
			return 0, c.opError("read", os.ErrDeadlineExceeded)
		default:
		}
		cut, healed := p.way.state()
		if cut {
			select {
			case <-healed:
			case <-c.closed:
			case <-c.rd.wait():
			}
			continue
		}
		p.mu.Lock()
		if len(p.buf) > 0 {
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			if len(p.buf) == 0 {
				p.buf = nil
			}
			p.signalLocked()
			p.mu.Unlock()
			return n, nil
		}
		if p.eof {
			p.mu.Unlock()
			return 0, io.EOF
		}
		changed := p.changed
		p.mu.Unlock()
		if len(b) == 0 {
			return 0, nil
		}
		select {
		case <-changed:
		case <-c.closed:
		case <-c.rd.wait():
		}
	}
}

// Write writes b into the connection, waiting for room while the peer
// has not read what is there, until the write deadline.
func (c *conn) Write(b []byte) (int, error) {
	p := c.out
	n := 0
	for {
		select {
		case <-c.closed:
			return n, c.opError("write", net.ErrClosed)
		case <-c.wd.wait():
			return n, c.opError("write", os.ErrDeadlineExceeded)
		default:
		}
		cut, healed := p.way.state()
		p.mu.Lock()
		if (p.broken && !cut) || p.eof {
			p.mu.Unlock()
			return n, c.opError("write", syscall.EPIPE)
		}
		if room := p.size - len(p.buf); room > 0 && n < len(b) {
			k := min(room, len(b)-n)
			p.buf = append(p.buf, b[n:n+k]...)
			n += k
			p.signalLocked()
		}
		if n == len(b) {
			p.mu.Unlock()
			return n, nil
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-healed: // the way changed: across a cut, a closed reader is seen once healed
		case <-c.closed:
		case <-c.wd.wait():
		}
	}
}

// Close closes this end: the peer reads what was written, then EOF, and
// its writes fail. Blocked reads and writes of this end return.
func (c *conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.out.closeWrite()
		c.in.closeRead()
		c.rd.stop()
		c.wd.stop()
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a read or write deadline: expired is closed once it has
// passed, by a timer of the clock in force (synctest's, in a bubble).
type deadline struct {
	mu      sync.Mutex
	timer   *time.Timer
	gen     uint64 // counts sets: a timer of an earlier one does nothing
	expired chan struct{}
}

func (d *deadline) init() { d.expired = make(chan struct{}) }

// set moves the deadline to t; zero is none.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if isClosed(d.expired) {
		d.expired = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		close(d.expired)
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(dur, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen && !isClosed(d.expired) {
			close(d.expired)
		}
	})
}

// wait returns a channel closed once the deadline has passed.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expired
}

// stop stops the timer, so that a closed connection holds none.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
