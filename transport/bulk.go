package transport

import (
	"context"
	"fmt"
	"sync"

	"github.com/meshd/meshd/proto"
)

// BulkQueueBytes bounds the frame bytes waiting in a link's bulk lane; a
// frame that finds the lane empty is always taken, whatever its size.
const BulkQueueBytes = 1 << 20

// bulkLane is a link's low-priority send queue: attachment chunks and
// the like. The writer takes a bulk frame only when the normal queue is
// empty, one frame at a time, so envelopes and acks queued meanwhile wait
// at most for one bulk frame already being written.
type bulkLane struct {
	mu     sync.Mutex
	q      [][]byte
	bytes  int
	closed bool
	room   chan struct{} // closed and replaced when a frame leaves the lane
}

// SendBulk queues frame in the link's bulk lane without blocking; the
// link owns frame from then on (a blob-chunk frame built in
// [ChunkFrameBuf] goes back to the pool once written). It
// returns [ErrQueueFull] when the lane holds [BulkQueueBytes] already,
// [ErrFrameTooLarge] and [ErrClosed] as [Link.Send] does. Bulk frames
// still queued when the link closes are dropped, never handed back by
// [Link.CloseAndDrain].
func (l *Link) SendBulk(frame []byte) error {
	if len(frame) > proto.MaxFrameSize {
		l.stats.tooLarge.Add(1)
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, len(frame), proto.MaxFrameSize)
	}
	if l.isClosing() {
		return ErrClosed
	}
	b := &l.bulk
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if b.bytes > 0 && b.bytes+len(frame) > BulkQueueBytes {
		b.mu.Unlock()
		return ErrQueueFull
	}
	b.q = append(b.q, frame)
	b.bytes += len(frame)
	b.mu.Unlock()
	l.wakeWriter()
	return nil
}

// SendBulkWait is [Link.SendBulk] that waits for room in the lane until
// ctx is done or the link closes.
func (l *Link) SendBulkWait(ctx context.Context, frame []byte) error {
	for {
		room := l.bulkRoom()
		err := l.SendBulk(frame)
		if err != ErrQueueFull {
			return err
		}
		select {
		case <-room:
		case <-l.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// BulkQueued returns the frame bytes waiting in the bulk lane.
func (l *Link) BulkQueued() int {
	l.bulk.mu.Lock()
	defer l.bulk.mu.Unlock()
	return l.bulk.bytes
}

func (l *Link) bulkRoom() <-chan struct{} {
	b := &l.bulk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.room == nil {
		b.room = make(chan struct{})
	}
	return b.room
}

// popBulk takes the bulk lane's first frame, and reports whether more
// remain.
func (l *Link) popBulk() ([]byte, bool) {
	b := &l.bulk
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.q) == 0 {
		return nil, false
	}
	f := b.q[0]
	b.q[0] = nil
	b.q = b.q[1:]
	if len(b.q) == 0 {
		b.q = nil
	}
	b.bytes -= len(f)
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
	return f, len(b.q) > 0
}

// closeBulk drops the lane's frames and refuses more.
func (l *Link) closeBulk() {
	b := &l.bulk
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.q, b.bytes = true, nil, 0
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// bulkOne writes one bulk frame if the normal queue is empty, and
// reports whether bulk frames remain.
func (w *writer) bulkOne() (bool, error) {
	f, more := w.l.popBulk()
	if f == nil {
		return false, nil
	}
	err := w.writeFrame(f)
	if len(f) > 0 && f[0] == creditedFrame { // written into the batch, or dropped with the link
		RecycleChunkFrame(f)
	}
	if err != nil {
		return more, err
	}
	return more, w.flush()
}
