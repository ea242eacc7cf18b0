package transport

import (
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// MaxRecvCredit bounds a link's receive credit (see [Link.GrantRecv]):
// whatever its fetches ask for, at most this many bytes of blob-chunk
// frames pass the receive limit unpaced.
const MaxRecvCredit = 64 << 20

// creditedFrame is the frame type whose bytes a receive credit covers:
// blob-chunk frames, which the receiver asked for (PROTOCOL.md §13.5).
const creditedFrame = byte(proto.FrameBlobChunk)

// chunkFrameCap is the size of a full blob-chunk frame, with room to
// spare: the chunk and its encoding's few dozen bytes.
const chunkFrameCap = proto.ChunkSize + 256

// chunkFrames holds the buffers of blob-chunk frames handed back with
// [RecycleChunkFrame], for the next ones a link reads: a transfer then
// takes the same few buffers over and over rather than a new 256 KiB
// one per chunk (half of the receiver's garbage). Like any sync.Pool it
// lets go of what it holds over two garbage collections.
var chunkFrames = sync.Pool{New: func() any { b := make([]byte, 0, chunkFrameCap); return &b }}

func getChunkFrame() []byte { return (*chunkFrames.Get().(*[]byte))[:0] }

// ChunkFrameBuf returns an empty buffer with room for a full blob-chunk
// frame, to build one in and send it with [Link.SendBulk]. Once the link
// has written the frame it hands the buffer back for the next one, so a
// serving node, too, takes the same few buffers over and over (before,
// a new 256 KiB frame per chunk sent made most of its garbage, and its
// collector ran a third of its CPU time in a transfer).
func ChunkFrameBuf() []byte { return getChunkFrame() }

// RecycleChunkFrame hands back the buffer of frame, a blob-chunk frame
// a link's handler was given, for a later one to be read into. The
// caller must hold the only reference to frame and its data, and drop
// it: what frame holds will be overwritten. A frame of any other size is
// left to the garbage collector.
func RecycleChunkFrame(frame []byte) {
	if cap(frame) != chunkFrameCap {
		return
	}
	b := frame[:0]
	chunkFrames.Put(&b)
}

// otherRing is how many of the last frames other than a transfer's a
// link remembers the times of, for [Link.OthersWithin].
const otherRing = 4

// OthersWithin reports whether the last four frames other than an
// attachment transfer's all went over the link (either way) within d:
// envelopes and acks are moving, not just a keepalive, or the message
// that started a transfer and its ack.
func (l *Link) OthersWithin(d time.Duration) bool {
	cutoff := time.Now().Add(-d).UnixNano()
	for i := range l.otherAt {
		if t := l.otherAt[i].Load(); t == 0 || t < cutoff {
			return false
		}
	}
	return true
}

// noteOther records frame f for OthersWithin unless it is a transfer's
// (blob-want, blob-chunk).
func (l *Link) noteOther(f []byte) {
	if len(f) > 0 && (f[0] == creditedFrame || f[0] == byte(proto.FrameBlobWant)) {
		return
	}
	l.otherAt[l.otherN.Add(1)%otherRing].Store(time.Now().UnixNano())
}

// GrantRecv lets n more bytes of blob-chunk frames from the peer pass the
// link's receive limit ([Config.RecvRate]) unpaced: the node grants them
// when it asks the peer for that many bytes of chunks. The credit is
// counted in record bytes (framing and the tag included) and held at
// most [MaxRecvCredit]. A chunk frame beyond the credit, and every other
// frame, is paced as before: the peer cannot raise its own rate, since
// only the receiver grants credit. Safe for concurrent use.
func (l *Link) GrantRecv(n int) {
	if n <= 0 {
		return
	}
	for {
		cur := l.credit.Load()
		next := min(cur+int64(n), MaxRecvCredit)
		if l.credit.CompareAndSwap(cur, next) {
			return
		}
	}
}

// RecvCredit returns the receive credit left (see [Link.GrantRecv]).
func (l *Link) RecvCredit() int { return int(l.credit.Load()) }

// recvFrame tracks, in the reader, whether the frame being assembled is
// one a receive credit covers. Reader only.
type recvFrame struct {
	credited bool
}

// next looks at transport plaintext pt, whose frame is new unless
// partial (a frame's records so far), and reports whether its bytes may
// be taken from the credit.
func (r *recvFrame) next(pt []byte, partial bool) bool {
	if len(pt) == 0 || (pt[0] != hdrChunk && pt[0] != hdrFinal) {
		return false // a keepalive, or an error the assembler reports
	}
	if !partial {
		r.credited = len(pt) > 1 && pt[1] == creditedFrame
	}
	return r.credited
}

// uncredited takes up to n bytes from the receive credit and returns
// the bytes it did not cover, which the reader paces. Reader only (the
// reader is the only one to take; GrantRecv only adds).
func (l *Link) uncredited(n int) int {
	for {
		cur := l.credit.Load()
		if cur <= 0 {
			return n
		}
		take := min(cur, int64(n))
		if l.credit.CompareAndSwap(cur, cur-take) {
			l.stats.recvCredited.Add(uint64(take))
			return n - int(take)
		}
	}
}
