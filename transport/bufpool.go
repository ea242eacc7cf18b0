package transport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// An idle link holds no large buffer. Its reader waits for the next record
// with a small buffer of its own, and borrows a record-sized buffer from
// recordPool only while a record larger than that is arriving or records
// keep coming; its writer borrows a batch buffer from smallWritePool or
// batchPool only while it has something to write. Both go back to their
// pool as soon as the link has nothing more in hand, so the memory of a
// node with many links follows its traffic, not its link count.
const (
	// idleReadSize is the reader's own buffer: keepalives and small
	// frames are read into it without borrowing.
	idleReadSize = 512
	// midReadSize holds a record of a few kilobytes, such as a peer list
	// at link up (about 60 bytes per member): a reader that is not
	// streaming borrows it rather than a record-sized buffer, so that a
	// burst of link-ups leaves the pool holding 16 KiB per link that took
	// part, not 64 KiB (the pool keeps what it held until the next
	// garbage collections, which an idle process may not run for two
	// minutes).
	midReadSize = 16 << 10
	// bigReadSize holds any record with its length prefix.
	bigReadSize = 2 + maxRecord
	// smallWriteSize is the batch buffer for a few small records.
	smallWriteSize = 4 << 10
	// batchSize is the most one batch can hold: the writer flushes once a
	// batch reaches flushThreshold, and a record adds at most 2+maxRecord.
	batchSize = flushThreshold + 2 + maxRecord
)

var (
	recordPool     = sync.Pool{New: func() any { b := make([]byte, bigReadSize); return &b }}
	midReadPool    = sync.Pool{New: func() any { b := make([]byte, midReadSize); return &b }}
	smallWritePool = sync.Pool{New: func() any { b := make([]byte, 0, smallWriteSize); return &b }}
	batchPool      = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}
)

// recvReader reads length-prefixed records from a connection, buffering
// in small while idle and in a pooled buffer while records flow.
type recvReader struct {
	conn  net.Conn
	small [idleReadSize]byte
	big   *[]byte // borrowed from recordPool or midReadPool; nil while idle
	buf   []byte  // small[:] or *big
	r, w  int     // unread bytes are buf[r:w]
	// flowing is set when a read filled the small buffer: more is
	// probably waiting, so the next read borrows. streaming is set when a
	// read filled a mid-sized borrowed buffer: the reader moves to a
	// record-sized one, to read a stream in fewer calls.
	flowing, streaming bool
}

// newRecvReader returns a reader of conn that first returns what br
// (the handshake's reader) buffered past the handshake.
func newRecvReader(conn net.Conn, br *bufio.Reader) *recvReader {
	rr := &recvReader{conn: conn}
	rr.buf = rr.small[:]
	if n := br.Buffered(); n > 0 {
		if n > len(rr.buf) {
			rr.borrow(n)
		}
		b, _ := br.Peek(n)
		rr.w = copy(rr.buf, b)
	}
	return rr
}

// borrow takes a buffer that holds at least n bytes.
func (rr *recvReader) borrow(n int) {
	if n <= midReadSize && !rr.streaming {
		rr.big = midReadPool.Get().(*[]byte)
	} else {
		rr.big = recordPool.Get().(*[]byte)
	}
	rr.buf = *rr.big
}

// giveBack returns the borrowed buffer to the pool it came from.
func (rr *recvReader) giveBack() {
	if len(*rr.big) == midReadSize {
		midReadPool.Put(rr.big)
	} else {
		recordPool.Put(rr.big)
	}
	rr.big = nil
}

// buffered returns how many unread bytes are held.
func (rr *recvReader) buffered() int { return rr.w - rr.r }

// idle gives the borrowed buffer back once nothing unread is left in it:
// the reader calls it before waiting for the next record.
func (rr *recvReader) idle() {
	if rr.big == nil || rr.r < rr.w {
		return
	}
	rr.giveBack()
	rr.buf = rr.small[:]
	rr.r, rr.w, rr.flowing, rr.streaming = 0, 0, false, false
}

// fill reads until at least n bytes are buffered (n at most bigReadSize),
// moving to a borrowed buffer when n does not fit the small one. A read
// that fills the whole small buffer means records are flowing: it moves
// to the borrowed buffer too, to read them in fewer calls.
func (rr *recvReader) fill(n int) error {
	if rr.buffered() >= n {
		return nil
	}
	if rr.big == nil && (n > len(rr.small) || rr.flowing) {
		rr.grow(n)
	} else if rr.big != nil && len(rr.buf) == midReadSize && (n > len(rr.buf) || rr.streaming) {
		rr.grow(n) // a longer record, or a stream: to a record-sized buffer
	}
	if rr.r+n > len(rr.buf) {
		rr.w = copy(rr.buf, rr.buf[rr.r:rr.w])
		rr.r = 0
	}
	for rr.buffered() < n {
		m, err := rr.conn.Read(rr.buf[rr.w:])
		if rr.w+m == len(rr.buf) {
			if rr.big == nil {
				rr.flowing = true
			} else {
				rr.streaming = true
			}
		}
		rr.w += m
		if rr.buffered() >= n {
			break
		}
		if err != nil {
			if err == io.EOF && rr.buffered() > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// grow moves the unread bytes to a borrowed buffer that holds n bytes:
// from the small buffer, or from a mid-sized one to a record-sized one.
func (rr *recvReader) grow(n int) {
	old := rr.big
	pending := rr.buf[rr.r:rr.w]
	rr.borrow(n)
	rr.w = copy(rr.buf, pending)
	rr.r = 0
	if old != nil {
		midReadPool.Put(old)
	}
}

// peek2 waits for a record's length prefix, consuming nothing, so that a
// read deadline passing here can be retried.
func (rr *recvReader) peek2() error { return rr.fill(2) }

// record reads one record and returns it in place: it is valid until the
// next call. A record longer than maxRecord cannot be encoded in the
// prefix; anything else is read whole.
func (rr *recvReader) record() ([]byte, error) {
	if err := rr.fill(2); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(rr.buf[rr.r:]))
	if 2+n > bigReadSize {
		return nil, fmt.Errorf("%w: record of %d bytes exceeds %d", ErrProtocol, n, maxRecord)
	}
	if err := rr.fill(2 + n); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	rec := rr.buf[rr.r+2 : rr.r+2+n]
	rr.r += 2 + n
	if rr.r == rr.w {
		rr.r, rr.w = 0, 0
	}
	return rec, nil
}

// release gives back a borrowed buffer, whatever it holds: the link is
// done reading.
func (rr *recvReader) release() {
	if rr.big != nil {
		rr.giveBack()
		rr.buf = rr.small[:]
		rr.r, rr.w = 0, 0
	}
}

// getWriteBuf returns a batch buffer with room for need bytes, as the
// pointer the pool holds it by: handing the same pointer back to
// [putWriteBuf] puts it back without allocating.
func getWriteBuf(need int) *[]byte {
	if need <= smallWriteSize {
		return smallWritePool.Get().(*[]byte)
	}
	if need <= batchSize {
		return batchPool.Get().(*[]byte)
	}
	b := make([]byte, 0, need)
	return &b
}

// putWriteBuf gives a batch buffer back to its pool, emptied; buffers of
// other sizes are left to the collector. The caller may hold the array
// in a longer slice than *p: only the capacity counts.
func putWriteBuf(p *[]byte) {
	*p = (*p)[:0]
	switch cap(*p) {
	case smallWriteSize:
		smallWritePool.Put(p)
	case batchSize:
		batchPool.Put(p)
	}
}
