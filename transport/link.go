package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flynn/noise"
	"golang.org/x/time/rate"

	"github.com/meshd/meshd/internal/clockgrid"
	"github.com/meshd/meshd/proto"
)

const (
	// flushThreshold is how many bytes of records the writer batches
	// before writing them out; it writes sooner when the queue is empty.
	flushThreshold = 64 << 10
	// closeFlushTimeout bounds how long [Link.Close] spends writing frames
	// that were queued before it was called.
	closeFlushTimeout = time.Second
)

// Link is an established, authenticated connection to one peer. Frames
// sent with [Link.Send] arrive in order at the peer's handler. A link is
// created by [Listener.Accept], [Dial], [Client] or [Server] and does no
// I/O until [Link.Start].
type Link struct {
	conn        net.Conn
	rr          *recvReader // reader goroutine only
	peer        *proto.HandshakePayload
	outbound    bool
	network     string
	local       string
	remote      string
	session     [32]byte
	peerStatic  []byte
	established time.Time
	keepalive   time.Duration
	idle        time.Duration
	log         *slog.Logger

	send  *linkCipher // owned by the writer goroutine
	recv  *linkCipher // owned by the reader goroutine
	wbuf  []byte      // records waiting to be written, pooled; writer only
	wbufp *[]byte     // the pool's handle on wbuf's array, nil with it; writer only

	// The send queue: q[qhead:] are the queued frames in order, at most
	// maxQFrames of them. The writer pops them from the head a batch at
	// a time, so frames not yet in a batch can still be taken back
	// ([Link.CloseAndDrain]). An idle link's queue holds at most
	// keepQueueSlots slots (a channel of maxQFrames would hold its slots
	// for the life of the link).
	qmu        sync.Mutex
	q          [][]byte // guarded by qmu
	qhead      int      // guarded by qmu
	qtaken     bool     // guarded by qmu: CloseAndDrain took the queue; push refuses
	maxQFrames int
	qready     chan struct{} // capacity 1: frames were queued
	pongq      chan struct{} // capacity 1: the reader asks the writer for a pong
	bulk       bulkLane      // low-priority frames, written when q is empty

	// qbytes is the frame bytes in sendq, at most maxQBytes unless one
	// frame alone is larger. Senders add before queueing; the writer
	// subtracts as it takes a frame and then, if waiters > 0, closes room
	// to wake them.
	qbytes    atomic.Int64
	maxQBytes int64
	waiters   atomic.Int32
	roomMu    sync.Mutex
	room      chan struct{} // guarded by roomMu: closed when bytes leave the queue

	// recvLimit paces the reader; nil without a limit. Reader only.
	recvLimit *rate.Limiter
	// credit is the record bytes of blob-chunk frames the reader takes
	// without pacing ([Link.GrantRecv]).
	credit atomic.Int64
	// otherAt holds when the last otherRing frames other than an
	// attachment transfer's went either way (unix nanoseconds), in a
	// ring that otherN, their count, indexes ([Link.OthersWithin]).
	otherAt [otherRing]atomic.Int64
	otherN  atomic.Uint64

	lastRecv atomic.Int64 // unix nanoseconds
	stats    linkCounters

	closing    chan struct{} // closed when shutdown begins
	writerDone chan struct{} // closed when the writer goroutine returns
	done       chan struct{} // closed when everything has stopped

	// mu guards the fields below. graceful, lingering and closeDeadline
	// are written before closing is closed and only read after, so the
	// goroutines read them without the lock.
	mu            sync.Mutex
	started       bool
	closed        bool
	err           error
	graceful      bool
	lingering     bool // the reader goes on until the peer closes or closeDeadline
	closeDeadline time.Time
}

// closeMode is how [Link.shutdown] closes a link.
type closeMode int

const (
	closeAbort  closeMode = iota // close the connection at once, dropping queued frames
	closeFlush                   // stop reading; write queued frames, for at most closeFlushTimeout
	closeLinger                  // closeFlush, then end our side of the stream, and read on until the peer ends its
)

type linkCounters struct {
	framesIn, framesOut atomic.Uint64
	bytesIn, bytesOut   atomic.Uint64
	queueFull           atomic.Uint64
	tooLarge            atomic.Uint64
	pingsIn, pingsOut   atomic.Uint64
	keepaliveWakes      atomic.Uint64
	recvThrottled       atomic.Uint64
	recvThrottledNanos  atomic.Int64
	recvCredited        atomic.Uint64
}

// LinkStats is a snapshot of a link's counters.
type LinkStats struct {
	FramesIn, FramesOut uint64 // application frames
	BytesIn, BytesOut   uint64 // application frame bytes, without framing or crypto overhead
	QueueFull           uint64 // frames refused by Send with ErrQueueFull
	FrameTooLarge       uint64 // frames refused by Send, or torn down on receipt, as too large
	PingsIn, PingsOut   uint64 // keepalive pings received and sent
	// KeepaliveWakes counts the wake-ups of the writer's keepalive
	// timer: each either pings or finds the link heard from and sleeps
	// again. An idle link's cost is mostly these and its pings.
	KeepaliveWakes uint64
	// RecvThrottled counts the times the reader stopped reading to keep
	// within [Config.RecvRate]; RecvThrottledTime is how long in all.
	RecvThrottled     uint64
	RecvThrottledTime time.Duration
	// RecvCredited is the record bytes of blob-chunk frames read within
	// the receive credit ([Link.GrantRecv]), not paced.
	RecvCredited uint64
}

func newLink(conn net.Conn, br *bufio.Reader, res hsResult, outbound bool, cfg Config) *Link {
	now := time.Now()
	l := &Link{
		conn:        conn,
		rr:          newRecvReader(conn, br),
		peer:        res.peer,
		outbound:    outbound,
		network:     conn.LocalAddr().Network(),
		local:       addrString(conn.LocalAddr(), conn.RemoteAddr()),
		remote:      addrString(conn.RemoteAddr(), conn.LocalAddr()),
		established: now,
		keepalive:   cfg.KeepaliveInterval,
		idle:        cfg.IdleTimeout,
		log:         cfg.Logger,
		send:        newLinkCipher(res.send),
		recv:        newLinkCipher(res.recv),
		maxQFrames:  cfg.SendQueue,
		qready:      make(chan struct{}, 1),
		maxQBytes:   int64(cfg.SendQueueBytes),
		room:        make(chan struct{}),
		pongq:       make(chan struct{}, 1),
		closing:     make(chan struct{}),
		writerDone:  make(chan struct{}),
		done:        make(chan struct{}),
	}
	if cfg.RecvRate > 0 {
		l.recvLimit = rate.NewLimiter(rate.Limit(cfg.RecvRate), cfg.RecvBurst)
	}
	copy(l.session[:], res.hash)
	l.peerStatic = append([]byte(nil), res.static...)
	l.lastRecv.Store(now.UnixNano())
	return l
}

// addrString returns a, or other if a is an unnamed Unix socket address:
// one end of a Unix connection has no name, so both ends report the path.
func addrString(a, other net.Addr) string {
	if a != nil && a.String() != "" && a.String() != "@" {
		return a.String()
	}
	if other != nil {
		return other.String()
	}
	return ""
}

// Peer returns the peer's verified handshake payload. Do not modify it.
func (l *Link) Peer() *proto.HandshakePayload { return l.peer }

// PeerKey returns the peer's identity.
func (l *Link) PeerKey() proto.PubKey { return l.peer.Identity }

// RemoteAddr returns the peer's host:port for TCP and the socket path for
// Unix links.
func (l *Link) RemoteAddr() string { return l.remote }

// LocalAddr returns our host:port for TCP and the socket path for Unix
// links. Unix links to one socket all have the same pair of addresses; use
// [Link.SessionID] to tell links apart.
func (l *Link) LocalAddr() string { return l.local }

// SessionID returns the final Noise handshake hash. It is the same at both
// ends of the link and differs for every link, so both ends can use it to
// agree on which of two links to keep. It is not secret.
func (l *Link) SessionID() [32]byte { return l.session }

// PeerStatic returns the peer's Noise static public key. A node that
// keeps one static key per process (see [Config.NoiseKey]) presents the
// same key on all its links, so a different key means a different process.
func (l *Link) PeerStatic() []byte { return l.peerStatic }

// Network returns "tcp" or "unix" ("pipe" for a [Client] or [Server] link
// over net.Pipe).
func (l *Link) Network() string { return l.network }

// Outbound reports whether we dialed the link.
func (l *Link) Outbound() bool { return l.outbound }

// Established returns when the handshake completed.
func (l *Link) Established() time.Time { return l.established }

// LastRecv returns when a message (of any kind) last arrived.
func (l *Link) LastRecv() time.Time { return time.Unix(0, l.lastRecv.Load()) }

// Stats returns a snapshot of the link's counters.
func (l *Link) Stats() LinkStats {
	return LinkStats{
		FramesIn:       l.stats.framesIn.Load(),
		FramesOut:      l.stats.framesOut.Load(),
		BytesIn:        l.stats.bytesIn.Load(),
		BytesOut:       l.stats.bytesOut.Load(),
		QueueFull:      l.stats.queueFull.Load(),
		FrameTooLarge:  l.stats.tooLarge.Load(),
		PingsIn:        l.stats.pingsIn.Load(),
		PingsOut:       l.stats.pingsOut.Load(),
		KeepaliveWakes: l.stats.keepaliveWakes.Load(),

		RecvThrottled:     l.stats.recvThrottled.Load(),
		RecvThrottledTime: time.Duration(l.stats.recvThrottledNanos.Load()),
		RecvCredited:      l.stats.recvCredited.Load(),
	}
}

// QueueLen returns the frames waiting in the link's send queue and the
// queue's capacity.
func (l *Link) QueueLen() (n, capacity int) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.q) - l.qhead, l.maxQFrames
}

// keepQueueSlots is how many slots an empty send queue keeps (24 bytes
// each), so that a link carrying a few frames at a time reuses them
// rather than allocating a slice per frame; a queue that grew past it
// while the peer was slow gives its array back once empty.
const keepQueueSlots = 32

// push queues frame if the queue has a free slot, and wakes the writer.
// It returns [ErrQueueFull] if the queue is full and [ErrClosed] once
// [Link.CloseAndDrain] took the queue.
func (l *Link) push(frame []byte) error {
	l.qmu.Lock()
	if l.qtaken {
		l.qmu.Unlock()
		return ErrClosed
	}
	if len(l.q)-l.qhead >= l.maxQFrames {
		l.qmu.Unlock()
		return ErrQueueFull
	}
	if len(l.q) == cap(l.q) && l.qhead > 0 {
		// Reuse the slots the writer emptied before growing.
		n := copy(l.q, l.q[l.qhead:])
		clear(l.q[n:])
		l.q, l.qhead = l.q[:n], 0
	}
	l.q = append(l.q, frame)
	l.qmu.Unlock()
	l.wakeWriter()
	return nil
}

func (l *Link) wakeWriter() {
	select {
	case l.qready <- struct{}{}:
	default:
	}
}

// pop moves frames from the head of the queue to dst, in order, until
// they reach flushThreshold bytes or the queue is empty. It reports
// whether frames remain.
func (l *Link) pop(dst [][]byte) ([][]byte, bool) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	n := 0
	for l.qhead < len(l.q) && n < flushThreshold {
		f := l.q[l.qhead]
		l.q[l.qhead] = nil
		l.qhead++
		dst = append(dst, f)
		n += len(f)
	}
	if l.qhead < len(l.q) {
		return dst, true
	}
	l.qhead = 0
	if cap(l.q) > keepQueueSlots {
		l.q = nil
	} else {
		l.q = l.q[:0]
	}
	return dst, false
}

// CloseAndDrain closes the link gracefully, like [Link.Close], but hands
// back the frames still waiting in its send queue instead of writing
// them, in the order they were queued, so that the caller can send them
// on another link to the same peer (a link closed as the loser of a
// duplicate pair). final, if not nil, is queued in their place as the
// link's last frame (a goodbye). Frames the writer has already taken
// (at most one batch, flushThreshold bytes and one frame) are written
// before final and are not returned. Sends after CloseAndDrain return
// [ErrClosed].
//
// A started link then ends its side of the stream after final (on TCP
// and Unix sockets), and its reader goes on handing frames to the
// handler until the peer ends its side or closes, or for at most a
// second: the frames the peer wrote before it saw final, which may be
// the peer's own goodbye after everything it had sent, are not lost.
// CloseAndDrain does not wait for the link to close; see [Link.Done].
// Only the first call returns frames.
func (l *Link) CloseAndDrain(final []byte) [][]byte {
	l.qmu.Lock()
	if l.qtaken {
		l.qmu.Unlock()
		return nil
	}
	l.qtaken = true
	var fs [][]byte
	if l.qhead < len(l.q) {
		fs = l.q[l.qhead:]
	}
	l.q, l.qhead = nil, 0
	if final != nil && !l.isClosing() {
		l.q = append(l.q, final)
		l.qbytes.Add(int64(len(final)))
	}
	l.qmu.Unlock()
	n := 0
	for _, f := range fs {
		n += len(f)
	}
	if n > 0 {
		l.release(n)
	}
	l.wakeWriter()
	l.shutdown(ErrClosed, closeLinger)
	return fs
}

// closeUnstarted finishes a link that was never started: no writer
// goroutine exists, and Start will not start one now, so the calling
// goroutine may use the send CipherState.
func (l *Link) closeUnstarted(graceful bool) {
	if graceful {
		_ = l.conn.SetWriteDeadline(l.closeDeadline)
		w := writer{l: l, slack: l.idle / 16, deadlineAt: time.Now()}
		w.drain()
	}
	l.conn.Close()
	close(l.done)
}

// QueueBytes returns the frame bytes waiting in the link's send queue and
// the queue's bound in bytes ([Config.SendQueueBytes]).
func (l *Link) QueueBytes() (n, capacity int) { return int(l.qbytes.Load()), int(l.maxQBytes) }

// reserve takes n bytes of the queue's byte budget. The budget may be
// overrun only by a frame that finds the queue empty, so that every frame
// up to proto.MaxFrameSize can be sent whatever the bound.
func (l *Link) reserve(n int) bool {
	for {
		cur := l.qbytes.Load()
		if cur > 0 && cur+int64(n) > l.maxQBytes {
			return false
		}
		if l.qbytes.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// hasRoom reports whether n more bytes fit the queue's byte budget now.
func (l *Link) hasRoom(n int) bool {
	cur := l.qbytes.Load()
	return cur == 0 || cur+int64(n) <= l.maxQBytes
}

// release returns n bytes to the budget: the writer took a frame, or a
// reserved frame was not queued after all.
func (l *Link) release(n int) {
	l.qbytes.Add(-int64(n))
	if l.waiters.Load() > 0 {
		l.roomMu.Lock()
		close(l.room)
		l.room = make(chan struct{})
		l.roomMu.Unlock()
	}
}

// roomChan returns the channel closed at the next release.
func (l *Link) roomChan() <-chan struct{} {
	l.roomMu.Lock()
	defer l.roomMu.Unlock()
	return l.room
}

// waitRoom waits until ok() holds, re-checking it at every release, until
// ctx is done or the link closes.
func (l *Link) waitRoom(ctx context.Context, ok func() bool) error {
	l.waiters.Add(1)
	defer l.waiters.Add(-1)
	for {
		// Take the channel before checking, so a release in between
		// still wakes us.
		ch := l.roomChan()
		if ok() {
			return nil
		}
		select {
		case <-ch:
		case <-l.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitRoom waits until n more bytes fit the send queue's byte bound (or
// the queue is empty), until ctx is done (returning its error) or the
// link closes ([ErrClosed]). It reserves nothing: a caller that is about
// to build a large frame, such as a history page read from the store,
// calls it first so that a peer that does not read makes it build
// nothing.
func (l *Link) WaitRoom(ctx context.Context, n int) error {
	if l.isClosing() {
		return ErrClosed
	}
	if l.hasRoom(n) {
		return nil
	}
	return l.waitRoom(ctx, func() bool { return l.hasRoom(n) })
}

// Send queues frame for the peer without blocking. It returns
// [ErrQueueFull] if the queue is full, in frames ([Config.SendQueue]) or
// in bytes ([Config.SendQueueBytes]) (the frame is dropped and counted),
// [ErrFrameTooLarge] if frame exceeds proto.MaxFrameSize, and [ErrClosed]
// once the link is closing. A nil error means queued, not delivered: a
// frame still queued when the link fails is lost (one still queued when
// it is closed with [Link.CloseAndDrain] is handed back). Send does not copy
// frame: the caller must not modify it afterwards, and may send the same
// frame on many links. Frames queued before [Link.Start] go out once it
// runs.
func (l *Link) Send(frame []byte) error {
	if len(frame) > proto.MaxFrameSize {
		l.stats.tooLarge.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, len(frame), proto.MaxFrameSize)
	}
	select {
	case <-l.closing:
		return ErrClosed
	default:
	}
	if !l.reserve(len(frame)) {
		l.stats.queueFull.Add(1)
		return ErrQueueFull
	}
	if err := l.push(frame); err != nil {
		l.release(len(frame))
		if errors.Is(err, ErrQueueFull) {
			l.stats.queueFull.Add(1)
		}
		return err
	}
	return nil
}

// SendWait is [Link.Send] for frames worth a wait: when the queue is full
// it waits for room until ctx is done (returning ctx's error) or the link
// closes ([ErrClosed]), instead of dropping the frame.
func (l *Link) SendWait(ctx context.Context, frame []byte) error {
	if len(frame) > proto.MaxFrameSize {
		l.stats.tooLarge.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, len(frame), proto.MaxFrameSize)
	}
	select {
	case <-l.closing:
		return ErrClosed
	default:
	}
	if !l.reserve(len(frame)) {
		reserved := false
		err := l.waitRoom(ctx, func() bool {
			reserved = l.reserve(len(frame))
			return reserved
		})
		if !reserved {
			return err
		}
	}
	perr := l.push(frame)
	if perr == nil {
		return nil
	}
	if errors.Is(perr, ErrQueueFull) {
		err := l.waitRoom(ctx, func() bool {
			perr = l.push(frame)
			return !errors.Is(perr, ErrQueueFull)
		})
		if err != nil && errors.Is(perr, ErrQueueFull) {
			perr = err
		}
	}
	if perr != nil {
		l.release(len(frame))
		return perr
	}
	return nil
}

// Start starts the link's reader and writer goroutines. handler receives
// each frame in order, from the reader goroutine, one at a time; it owns
// the frame. While handler runs no further frames are read, so it should
// hand slow work off. It must not call [Link.Close] (which waits for the
// reader); [Link.CloseWithError] is fine. A nil handler discards frames.
// Only the first call has an effect.
func (l *Link) Start(handler func(frame []byte)) {
	if handler == nil {
		handler = func([]byte) {}
	}
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return
	}
	l.started = true
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return // shutdown saw started == false and finished the link
	}
	go l.writeLoop()
	go l.readLoop(handler)
}

// Close closes the link and waits for its goroutines. Frames already
// queued are written first, for at most a second, even if the link was
// never started (so Send of a goodbye frame then Close works on a link
// just returned by Accept or Dial). Close is idempotent;
// [Link.Err] reports [ErrClosed] unless the link had already failed.
func (l *Link) Close() error {
	l.shutdown(ErrClosed, closeFlush)
	<-l.done
	return nil
}

// CloseWithError closes the link at once, dropping queued frames, and
// records err (ErrClosed if nil) as the reason unless the link had already
// closed. It does not wait; use [Link.Done].
func (l *Link) CloseWithError(err error) {
	if err == nil {
		err = ErrClosed
	}
	l.shutdown(err, closeAbort)
}

// Done is closed once the link has closed and its goroutines have exited.
func (l *Link) Done() <-chan struct{} { return l.done }

// Err returns why the link closed, or nil while it is open.
func (l *Link) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// shutdown begins closing the link; the first call's err and mode win.
// See [closeMode].
func (l *Link) shutdown(err error, mode closeMode) {
	graceful := mode != closeAbort
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.err = err
	started := l.started
	l.graceful = graceful
	l.lingering = mode == closeLinger && started
	l.closeDeadline = time.Now().Add(closeFlushTimeout)
	l.mu.Unlock()

	close(l.closing)
	l.closeBulk()
	if !started {
		if mode == closeLinger {
			// CloseAndDrain does not wait for the final frame's write.
			go l.closeUnstarted(graceful)
			return
		}
		l.closeUnstarted(graceful)
		return
	}
	if l.graceful {
		// Bound the reader's linger, or unblock it at once, and bound the
		// writer's flush. Both goroutines re-check closing after moving a
		// deadline, so these cannot be overwritten.
		if l.lingering {
			_ = l.conn.SetReadDeadline(l.closeDeadline)
		} else {
			_ = l.conn.SetReadDeadline(aLongTimeAgo)
		}
		_ = l.conn.SetWriteDeadline(l.closeDeadline)
		return
	}
	l.conn.Close()
}

// stopReading reports whether the reader should stop now that the link
// is closing: always, unless the link lingers.
func (l *Link) stopReading() bool { return l.isClosing() && !l.lingering }

func (l *Link) isClosing() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// readLoop owns the receive CipherState. It never writes: pings are
// answered through pongq.
func (l *Link) readLoop(handler func([]byte)) {
	var err error
	defer func() {
		mode := closeAbort
		if errors.Is(err, io.EOF) {
			// The peer ended its stream at a record boundary: it closed,
			// or it lingers for our last frames (CloseAndDrain), which
			// then still reach it.
			mode = closeFlush
		}
		l.shutdown(err, mode)
		<-l.writerDone
		l.conn.Close()
		l.log.Debug("link closed", "peer", l.peer.Identity.Fingerprint(), "remote", l.remote, "err", l.Err())
		close(l.done)
	}()

	// The read deadline is pushed forward at most every slack. When it
	// passes, the reader looks once more for slack before giving up: if
	// this process was stalled (descheduled, paused), the peer's messages
	// may be waiting unread, and Go reports a passed deadline without
	// trying the read. So the link closes between idle and idle+2*slack
	// after the last message.
	slack := l.idle / 16
	graced := false
	deadlineAt := time.Now()
	if derr := l.conn.SetReadDeadline(deadlineAt.Add(l.idle + slack)); derr != nil {
		err = l.readErr(derr)
		return
	}
	if l.isClosing() && l.lingering {
		// Closed before this goroutine ran (a duplicate pair's loser):
		// the deadline just set must not replace the linger's.
		_ = l.conn.SetReadDeadline(l.closeDeadline)
	}
	defer l.rr.release()
	asm := assembler{max: proto.MaxFrameSize}
	var cur recvFrame
	for {
		if l.stopReading() {
			return
		}
		l.rr.idle()
		// peek2 consumes nothing, so a timeout here can be retried.
		if perr := l.rr.peek2(); perr != nil {
			if errors.Is(perr, os.ErrDeadlineExceeded) && !graced && !l.isClosing() {
				graced = true
				if derr := l.conn.SetReadDeadline(time.Now().Add(slack)); derr != nil {
					err = l.readErr(derr)
					return
				}
				continue
			}
			err = l.readErr(perr)
			return
		}
		graced = false
		rec, rerr := l.rr.record()
		if rerr != nil {
			err = l.readErr(rerr)
			return
		}
		if len(rec) < minTransport {
			err = fmt.Errorf("%w: %d-byte transport message", ErrProtocol, len(rec))
			return
		}
		recLen := 2 + len(rec)
		pt, derr := l.recv.Decrypt(rec[:0], nil, rec)
		if derr != nil {
			if errors.Is(derr, noise.ErrMaxNonce) {
				err = fmt.Errorf("receive: %w", derr)
			} else {
				err = fmt.Errorf("%w: %w", ErrProtocol, derr)
			}
			return
		}
		if l.recvLimit != nil {
			// Paced after decryption, which tells a chunk frame the node
			// asked for (GrantRecv) from the rest; nothing more is read
			// until the wait is over, so the limit holds as before.
			n := recLen
			if cur.next(pt, asm.partial) {
				n = l.uncredited(n)
			}
			if waited, werr := l.pace(n); werr != nil {
				return // closing
			} else if waited {
				deadlineAt = time.Time{} // push the read deadline below
			}
		}
		now := time.Now()
		l.lastRecv.Store(now.UnixNano())
		if now.Sub(deadlineAt) > slack {
			deadlineAt = now
			if derr := l.conn.SetReadDeadline(now.Add(l.idle + slack)); derr != nil {
				err = l.readErr(derr)
				return
			}
			if l.isClosing() && l.lingering {
				_ = l.conn.SetReadDeadline(l.closeDeadline)
			}
		}
		m, aerr := asm.add(pt)
		if aerr != nil {
			if errors.Is(aerr, ErrFrameTooLarge) {
				l.stats.tooLarge.Add(1)
			}
			err = aerr
			return
		}
		switch m.kind {
		case hdrFinal:
			if l.stopReading() {
				return
			}
			l.stats.framesIn.Add(1)
			l.stats.bytesIn.Add(uint64(len(m.frame)))
			l.noteOther(m.frame)
			handler(m.frame)
		case hdrPing:
			l.stats.pingsIn.Add(1)
			select {
			case l.pongq <- struct{}{}:
			default: // a pong is already due
			}
		}
	}
}

// pace takes n bytes from the receive token bucket, waiting for them when
// it is empty: the reader then reads nothing, so the socket's receive
// buffer fills and TCP flow control stops the peer. It reports whether it
// waited; an error means the link is closing.
func (l *Link) pace(n int) (bool, error) {
	now := time.Now()
	r := l.recvLimit.ReserveN(now, n)
	if !r.OK() {
		return false, nil // n above the burst: cannot happen: the burst holds a record
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return false, nil
	}
	l.stats.recvThrottled.Add(1)
	l.stats.recvThrottledNanos.Add(int64(d))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-l.closing:
	}
	// A lingering link reads on until the peer's stream ends, within
	// its close deadline: the wait goes on, or the frames the peer wrote
	// before it saw our goodbye would be lost (CloseAndDrain's promise).
	l.mu.Lock()
	linger, deadline := l.lingering, l.closeDeadline
	l.mu.Unlock()
	if !linger {
		return true, ErrClosed
	}
	dt := time.NewTimer(time.Until(deadline))
	defer dt.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-dt.C:
		return true, ErrClosed
	}
}

func (l *Link) readErr(err error) error {
	switch {
	case l.isClosing():
		return nil // the reason is already recorded
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: nothing received for %v", ErrTimeout, l.idle)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("closed by peer: %w", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("connection lost mid-message: %w", err)
	case errors.Is(err, ErrProtocol):
		return err
	}
	return fmt.Errorf("read: %w", err)
}

// writeLoop owns the send CipherState. It batches queued frames into one
// write while the queue is non-empty.
func (l *Link) writeLoop() {
	defer close(l.writerDone)
	timer := time.NewTimer(l.keepalive)
	defer timer.Stop()
	w := writer{l: l, slack: l.idle / 16, lastSend: time.Now()}

	var err error
	for err == nil {
		select {
		case <-l.closing:
			if l.graceful {
				w.drain()
			}
			if l.lingering {
				// Our last frame is out: the peer's reader sees the end
				// of the stream, and ours reads on until the peer's.
				if cw, ok := l.conn.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			return
		case <-l.qready:
			err = w.batch()
			bulkMore := false
			if err == nil && !w.more {
				bulkMore, err = w.bulkOne()
			}
			if w.more || bulkMore {
				l.wakeWriter() // after a look at pongs, the timer and closing
			}
		case <-l.pongq:
			if err = w.seal(hdrPong, nil); err == nil {
				err = w.flush()
			}
		case now := <-timer.C:
			l.stats.keepaliveWakes.Add(1)
			// Ping when nothing has been received for the interval: the
			// pong keeps our reader's idle timer fed, and the ping the
			// peer's. A link whose peer pings first then carries one ping
			// and one pong per interval, not two of each. Ping also when
			// nothing has been sent for two intervals, whatever was
			// received, for a peer that pings only when it has sent
			// nothing (PROTOCOL.md §13.3) and is streaming to us.
			// The accepting side waits one grid step longer for the
			// receive rule: both ends heard from each other at the same
			// moment (a ping and its pong), so with the same interval
			// their timers fall on the same grid step, and both would
			// ping and both pong, twice the traffic and wake-ups. The
			// dialing side pings first; the other pings only when the
			// dialing side is silent.
			step := min(keepaliveGrid, l.keepalive/5)
			recvIdle := l.keepalive
			if !l.outbound {
				recvIdle += step
			}
			wait := min(l.LastRecv().Add(recvIdle).Sub(now), w.lastSend.Add(2*l.keepalive).Sub(now))
			if wait > 0 {
				timer.Reset(clockgrid.Wait(now, wait, step))
				continue
			}
			l.stats.pingsOut.Add(1)
			if err = w.seal(hdrPing, nil); err == nil {
				err = w.flush()
			}
			// The pong comes back within a step, so the receive rule is
			// next due at the first grid step an interval after the
			// ping went out: wake then, once. (At the fire time plus an
			// interval the pong has not aged an interval yet, and that
			// wake-up only re-armed the timer.)
			timer.Reset(clockgrid.Wait(time.Now(), recvIdle, step))
		}
	}
	l.shutdown(l.writeErr(err), closeAbort)
}

// keepaliveGrid aligns keepalive pings to whole seconds of the clock.
// An idle process pays a wake-up for each ping it sends and each ping or
// pong it receives (some 150-190 µs of CPU on a small VM, far more than
// the record itself); a node with hundreds of links whose pings fell at
// random times would wake a hundred times a second for nothing. Aligned,
// the links of a node ping in one wake-up, and since all nodes read
// nearly the same clock, their peers' pings and pongs arrive together
// too. A ping goes out at most one grid step late (the step is a fifth
// of the keepalive interval when that is shorter than 5 s).
const keepaliveGrid = time.Second

func (l *Link) writeErr(err error) error {
	switch {
	case l.isClosing():
		return nil
	case errors.Is(err, noise.ErrMaxNonce):
		return fmt.Errorf("send: %w", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w: a write blocked for %v", ErrTimeout, ErrSlowReader, l.idle)
	}
	return fmt.Errorf("write: %w", err)
}

// writer is the writer goroutine's state.
type writer struct {
	l          *Link
	slack      time.Duration
	deadlineAt time.Time
	lastSend   time.Time
	fs         [][]byte // the frames of the batch in hand, reused
	more       bool     // frames remained queued after the last batch
}

// batch pops up to flushThreshold bytes of frames from the queue and
// writes them in one write.
func (w *writer) batch() error {
	w.fs, w.more = w.l.pop(w.fs[:0])
	for i, f := range w.fs {
		w.fs[i] = nil
		w.l.noteOther(f)
		if err := w.frame(f); err != nil {
			return err
		}
		if len(w.l.wbuf) >= flushThreshold {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	if cap(w.fs) > keepQueueSlots {
		w.fs = nil
	}
	return w.flush()
}

// frame appends the records of one frame to the batch, flushing as the
// batch fills.
func (w *writer) frame(f []byte) error {
	w.l.release(len(f))
	return w.writeFrame(f)
}

// writeFrame appends the records of one frame, whatever its queue.
func (w *writer) writeFrame(f []byte) error {
	n := len(f)
	for len(f) > maxChunk {
		if err := w.seal(hdrChunk, f[:maxChunk]); err != nil {
			return err
		}
		f = f[maxChunk:]
		if len(w.l.wbuf) >= flushThreshold {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	if err := w.seal(hdrFinal, f); err != nil {
		return err
	}
	w.l.stats.framesOut.Add(1)
	w.l.stats.bytesOut.Add(uint64(n))
	return nil
}

// seal appends one record holding header and body, encrypted in place.
func (w *writer) seal(header byte, body []byte) error {
	l := w.l
	n := 1 + len(body) + tagSize
	if cap(l.wbuf)-len(l.wbuf) < 2+n {
		np := getWriteBuf(len(l.wbuf) + 2 + n)
		nb := append((*np)[:0], l.wbuf...)
		if l.wbufp != nil {
			putWriteBuf(l.wbufp)
		}
		l.wbuf, l.wbufp = nb, np
	}
	start := len(l.wbuf)
	l.wbuf = binary.BigEndian.AppendUint16(l.wbuf, uint16(n))
	l.wbuf = append(l.wbuf, header)
	l.wbuf = append(l.wbuf, body...)
	pt := l.wbuf[start+2:]
	// pt has room for the tag (checked above), so Encrypt seals in place.
	ct, err := l.send.Encrypt(pt[:0], nil, pt)
	if err != nil {
		l.wbuf = l.wbuf[:start]
		return err
	}
	if len(ct) != n || &ct[0] != &pt[0] {
		panic("transport: in-place seal did not stay in place")
	}
	l.wbuf = l.wbuf[:start+2+n]
	return nil
}

// flush writes the batch. The write deadline is pushed forward at most
// every slack, so one write may block for between idle and idle+slack.
func (w *writer) flush() error {
	l := w.l
	if len(l.wbuf) == 0 {
		return nil
	}
	now := time.Now()
	if now.Sub(w.deadlineAt) > w.slack {
		w.deadlineAt = now
		if err := l.conn.SetWriteDeadline(now.Add(l.idle + w.slack)); err != nil {
			return err
		}
		if l.isClosing() && l.graceful {
			_ = l.conn.SetWriteDeadline(l.closeDeadline)
		}
	}
	_, err := l.conn.Write(l.wbuf)
	w.lastSend = now
	if l.wbufp != nil {
		putWriteBuf(l.wbufp) // an idle link holds no batch buffer
	}
	l.wbuf, l.wbufp = nil, nil
	return err
}

// drain writes what is queued, for a graceful close. The closer has set
// the write deadline.
func (w *writer) drain() {
	for {
		if w.batch() != nil || !w.more {
			return
		}
	}
}
