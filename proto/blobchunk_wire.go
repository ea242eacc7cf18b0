package proto

import (
	"encoding/binary"
	"math"
)

// A blob-chunk frame carries up to a ChunkSize of data, and a node moves
// hundreds of them a second: the generic CBOR path would copy the data
// on decoding and once more to check the canonical form by re-encoding
// it, and twice on encoding (marshal, then prefix the frame type). The
// functions below read and write the one canonical form of a BlobChunk
// directly: a map of 2 to 4 entries, keys 0 to 3 in order, each integer
// in its shortest form, key 2 left out when Index is 0 and key 3 when
// Data is empty. The canonical form of the data's byte string is its
// length header in shortest form, so the data itself need not be read.
// Anything else falls back to the generic path (FuzzBlobChunkWire checks
// that both agree).

// cborHead appends a CBOR head of major type major and argument v in its
// shortest form.
func cborHead(dst []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(dst, m|byte(v))
	case v <= math.MaxUint8:
		return append(dst, m|24, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, m|25), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, m|27), v)
}

// readHead reads a CBOR head of major type major in its shortest form
// from b, returning its argument and the rest of b; ok is false for any
// other major type, a longer form, or too few bytes.
func readHead(b []byte, major byte) (v uint64, rest []byte, ok bool) {
	if len(b) == 0 || b[0]>>5 != major {
		return 0, nil, false
	}
	ai := b[0] & 31
	b = b[1:]
	var n int
	var lo uint64
	switch {
	case ai < 24:
		return uint64(ai), b, true
	case ai == 24:
		n, lo = 1, 24
	case ai == 25:
		n, lo = 2, math.MaxUint8+1
	case ai == 26:
		n, lo = 4, math.MaxUint16+1
	case ai == 27:
		n, lo = 8, math.MaxUint32+1
	default:
		return 0, nil, false
	}
	if len(b) < n {
		return 0, nil, false
	}
	for _, c := range b[:n] {
		v = v<<8 | uint64(c)
	}
	return v, b[n:], v >= lo
}

const (
	cborUint  = 0
	cborBytes = 2
	cborMap   = 5
)

// AppendBlobChunk appends the canonical encoding of c (what [Marshal]
// gives) to dst, copying c.Data once.
func AppendBlobChunk(dst []byte, c *BlobChunk) []byte {
	return append(appendBlobChunkHead(dst, c, len(c.Data)), c.Data...)
}

// appendBlobChunkHead appends the canonical encoding of c, taking its
// data to be dataLen bytes, up to where those bytes go.
func appendBlobChunkHead(dst []byte, c *BlobChunk, dataLen int) []byte {
	n := uint64(2)
	if c.Index != 0 {
		n++
	}
	if dataLen > 0 {
		n++
	}
	dst = cborHead(dst, cborMap, n)
	dst = cborHead(dst, cborUint, 0)
	dst = cborHead(dst, cborBytes, uint64(len(c.SHA256)))
	dst = append(dst, c.SHA256[:]...)
	dst = cborHead(dst, cborUint, 1)
	dst = cborHead(dst, cborUint, uint64(c.What))
	if c.Index != 0 {
		dst = cborHead(dst, cborUint, 2)
		dst = cborHead(dst, cborUint, uint64(c.Index))
	}
	if dataLen > 0 {
		dst = cborHead(dst, cborUint, 3)
		dst = cborHead(dst, cborBytes, uint64(dataLen))
	}
	return dst
}

// blobChunkOverhead bounds the bytes of a BlobChunk's encoding besides
// its data: the map head, four keys, the hash's head and bytes, and the
// longest heads of What, Index and the data.
const blobChunkOverhead = 1 + 4 + 2 + HashSizeBytes + 2 + 5 + 5

// HashSizeBytes is the size of a [Hash].
const HashSizeBytes = len(Hash{})

// BlobChunkFrame returns c's frame: the FrameBlobChunk type byte, then
// c's canonical encoding, built with one copy of c.Data.
func BlobChunkFrame(c *BlobChunk) []byte {
	b := make([]byte, 1, 1+blobChunkOverhead+len(c.Data))
	b[0] = byte(FrameBlobChunk)
	return AppendBlobChunk(b, c)
}

// BlobChunkDataFrame returns the frame of chunk index of blob h, n bytes
// long, with data, the last n bytes of the frame, left for the caller to
// fill: a chunk read from a file straight into its frame is never copied
// on the way. The frame is BlobChunkFrame's once data is filled. It is
// built in buf when buf has room (a frame never sent), else in a new
// slice.
func BlobChunkDataFrame(buf []byte, h Hash, index uint32, n int) (frame, data []byte) {
	b := buf[:0]
	if cap(b) < 1+blobChunkOverhead+n {
		b = make([]byte, 0, 1+blobChunkOverhead+n)
	}
	b = append(b, byte(FrameBlobChunk))
	b = appendBlobChunkHead(b, &BlobChunk{SHA256: h, What: BlobChunkData, Index: index}, n)
	b = b[:len(b)+n]
	return b, b[len(b)-n:]
}

// decodeBlobChunk decodes b if it is exactly the canonical form of a
// BlobChunk, with c.Data aliasing b; it reports false otherwise,
// leaving the verdict (and the error) to the generic decoder.
func decodeBlobChunk(b []byte, c *BlobChunk) bool {
	n, b, ok := readHead(b, cborMap)
	if !ok || n < 2 || n > 4 {
		return false
	}
	key := func(want uint64) bool {
		var k uint64
		k, b, ok = readHead(b, cborUint)
		return ok && k == want
	}
	if !key(0) {
		return false
	}
	var l uint64
	if l, b, ok = readHead(b, cborBytes); !ok || l != uint64(len(c.SHA256)) || len(b) < len(c.SHA256) {
		return false
	}
	copy(c.SHA256[:], b)
	b = b[len(c.SHA256):]
	if !key(1) {
		return false
	}
	var v uint64
	if v, b, ok = readHead(b, cborUint); !ok || v > math.MaxUint8 {
		return false
	}
	c.What = uint8(v)
	rest := n - 2
	if rest > 0 && len(b) > 0 && b[0] == 2 { // key 2, the index: never 0, which is left out
		if v, b, ok = readHead(b[1:], cborUint); !ok || v == 0 || v > math.MaxUint32 {
			return false
		}
		c.Index = uint32(v)
		rest--
	}
	if rest > 0 { // key 3, the data: never empty, and last
		if len(b) == 0 || b[0] != 3 {
			return false
		}
		if l, b, ok = readHead(b[1:], cborBytes); !ok || l == 0 || l != uint64(len(b)) {
			return false
		}
		c.Data, b = b, nil
		rest--
	}
	return rest == 0 && len(b) == 0
}
