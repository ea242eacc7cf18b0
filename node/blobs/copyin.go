package blobs

import (
	"crypto/sha256"
	"io"
	"os"

	"github.com/meshd/meshd/proto"
)

// copyInPiece is how much of a file copyIn copies at a time (sixteen
// chunks), and copyInBlock how much of the stored copy its hasher reads
// back at a time (four chunks). Both are whole chunks, so a block never
// splits one.
const (
	copyInPiece = 16 * proto.ChunkSize
	copyInBlock = 4 * proto.ChunkSize
)

// copyInAhead bounds the pieces copied and not yet hashed: the copy runs
// at most that far ahead of the hashes.
const copyInAhead = 8

// copyIn copies at most limit bytes of r into f, and returns the size of
// the copy, its SHA-256 and its chunk hashes (what proto.Digest gives).
//
// What is hashed is the stored copy, read back from f, not r: a source
// that changes during the copy cannot make the store hold other bytes
// than its hashes name. The copy, the chunk hashes and the whole's
// SHA-256 run in three goroutines, one piece behind the other, so they
// take two cores when there are two. From a regular file the kernel
// copies (f.ReadFrom: copy_file_range on Linux), with no pass through
// this process's memory. Each piece is handed to the kernel's writeback
// as it is copied, so the fsync that follows finds little left to write.
func copyIn(r io.Reader, limit int64, f *os.File) (size uint64, sum proto.Hash, chunks []proto.Hash, err error) {
	pieces := make(chan int64, copyInAhead)
	res := make(chan storedHashes, 1)
	go func() { res <- hashStored(f, pieces) }()
	var buf []byte
	if _, ok := r.(*os.File); !ok {
		buf = make([]byte, copyInBlock)
	}
	var copied int64
	for copied < limit {
		want := min(copyInPiece, limit-copied)
		n, cerr := copyPiece(f, r, want, buf)
		if n > 0 {
			startWriteback(f, copied, int(n))
			copied += n
			pieces <- copied
		}
		if cerr != nil {
			err = cerr
			break
		}
		if n < want {
			break // the end of r
		}
	}
	close(pieces)
	h := <-res
	if err == nil {
		err = h.err
	}
	if err != nil {
		return 0, sum, nil, err
	}
	return uint64(copied), h.sum, h.chunks, nil
}

// copyPiece appends up to n bytes of r to f: by the kernel when r is a
// file (buf is then unused), else through buf.
func copyPiece(f *os.File, r io.Reader, n int64, buf []byte) (int64, error) {
	lr := &io.LimitedReader{R: r, N: n}
	if buf == nil {
		return f.ReadFrom(lr)
	}
	return io.CopyBuffer(writerOnly{f}, lr, buf)
}

// writerOnly hides f's ReadFrom, so io.CopyBuffer uses the buffer given.
type writerOnly struct{ io.Writer }

// storedHashes is what hashStored found.
type storedHashes struct {
	sum    proto.Hash
	chunks []proto.Hash
	err    error
}

// readBlock is one block of the stored copy read back (readBack), and
// the buffer it holds it in where readBack copies.
type readBlock struct {
	b, buf []byte
	done   func()
}

// hashStored reads f back, up to each offset received on pieces in turn,
// and hashes it: the chunk hashes here, the whole's SHA-256 in a
// goroutine of its own on the same blocks, at most three blocks in hand.
// It drains pieces whatever happens, so the copy never waits on a hasher
// that stopped.
func hashStored(f *os.File, pieces <-chan int64) (out storedHashes) {
	const blocks = 3
	free := make(chan []byte, blocks)
	for range blocks {
		var buf []byte
		if readBackBuf {
			buf = make([]byte, copyInBlock)
		}
		free <- buf
	}
	full := make(chan readBlock, blocks)
	whole := make(chan proto.Hash, 1)
	go func() {
		h := sha256.New()
		for rb := range full {
			h.Write(rb.b)
			rb.done()
			free <- rb.buf
		}
		var s proto.Hash
		h.Sum(s[:0])
		whole <- s
	}()
	var hashed int64
	for end := range pieces {
		for hashed < end && out.err == nil {
			buf := <-free
			b, done, err := readBack(f, hashed, int(min(copyInBlock, end-hashed)), buf)
			if err != nil {
				out.err = err
				free <- buf
				break
			}
			for i := 0; i < len(b); i += proto.ChunkSize {
				out.chunks = append(out.chunks, sha256.Sum256(b[i:min(i+proto.ChunkSize, len(b))]))
			}
			full <- readBlock{b: b, buf: buf, done: done}
			hashed += int64(len(b))
		}
	}
	close(full)
	out.sum = <-whole
	return out
}

// readBackCopy reads n bytes of f from off into buf, which holds them.
func readBackCopy(f *os.File, off int64, n int, buf []byte) ([]byte, func(), error) {
	if _, err := f.ReadAt(buf[:n], off); err != nil {
		return nil, nil, err
	}
	return buf[:n], func() {}, nil
}
