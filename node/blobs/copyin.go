package blobs

import (
	"crypto/sha256"
	"io"
	"os"

	"github.com/meshd/meshd/proto"
)

// copyInBlock is how much of a file copyIn reads, hashes and writes at a
// time: four chunks.
const copyInBlock = 4 * proto.ChunkSize

// copyIn copies r into f in one pass, and returns its size, its SHA-256
// and its chunk hashes (what proto.Digest gives). The SHA-256 of the
// whole runs in a goroutine of its own beside the chunk hashes and the
// writes, on blocks handed over in order, so the two hashes of each byte
// take two cores when there are two. The data is handed to the kernel's
// writeback as it is written, so the fsync that follows finds little
// left to write.
func copyIn(r io.Reader, f *os.File) (size uint64, sum proto.Hash, chunks []proto.Hash, err error) {
	const bufs = 3
	free := make(chan []byte, bufs)
	for range bufs {
		free <- make([]byte, copyInBlock)
	}
	full := make(chan []byte, bufs)
	whole := make(chan proto.Hash, 1)
	go func() {
		h := sha256.New()
		for b := range full {
			h.Write(b)
			free <- b[:cap(b)]
		}
		var s proto.Hash
		h.Sum(s[:0])
		whole <- s
	}()
	defer func() {
		close(full)
		s := <-whole
		if err == nil {
			sum = s
		}
	}()
	for {
		buf := <-free
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			b := buf[:n]
			for i := 0; i < n; i += proto.ChunkSize {
				chunks = append(chunks, sha256.Sum256(b[i:min(i+proto.ChunkSize, n)]))
			}
			if _, werr := f.Write(b); werr != nil {
				return 0, sum, nil, werr
			}
			startWriteback(f, int64(size), n)
			size += uint64(n)
			full <- b
		} else {
			free <- buf
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return size, sum, chunks, nil
		}
		if rerr != nil {
			return 0, sum, nil, rerr
		}
	}
}
