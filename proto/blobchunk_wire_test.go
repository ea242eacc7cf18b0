package proto

import (
	"bytes"
	"testing"
)

// slowBlobChunk is the generic decoder ParseBlobChunk falls back to.
func slowBlobChunk(b []byte) (BlobChunk, bool) {
	var c BlobChunk
	return c, UnmarshalCanonical(b, &c) == nil
}

func sameChunk(a, b BlobChunk) bool {
	return a.SHA256 == b.SHA256 && a.What == b.What && a.Index == b.Index && bytes.Equal(a.Data, b.Data)
}

// checkWire fails unless the direct decoder and the generic one agree on
// b: both refuse it, or both take it to the same value.
func checkWire(t *testing.T, b []byte) {
	t.Helper()
	var fast BlobChunk
	fok := decodeBlobChunk(b, &fast)
	slow, sok := slowBlobChunk(b)
	if fok != sok {
		t.Fatalf("%x: direct decoder %v, generic %v", b, fok, sok)
	}
	if fok && !sameChunk(fast, slow) {
		t.Fatalf("%x: direct %+v, generic %+v", b, fast, slow)
	}
}

// TestBlobChunkWire: AppendBlobChunk writes what Marshal writes, and the
// direct decoder agrees with the generic one on canonical forms and on
// near misses (longer heads, index 0 spelt out, empty data, trailing
// bytes, keys out of order).
func TestBlobChunkWire(t *testing.T) {
	h := Hash{1, 2, 3}
	cases := []BlobChunk{
		{SHA256: h, What: BlobChunkData, Index: 3, Data: []byte("abc")},
		{SHA256: h, What: BlobChunkData, Data: make([]byte, ChunkSize)},
		{SHA256: h, What: BlobChunkData, Index: 1 << 20, Data: make([]byte, 300)},
		{SHA256: h, What: BlobUnavailable},
		{SHA256: h, What: 200, Index: 70000},
		{SHA256: h, What: 24, Index: 24, Data: make([]byte, 24)},
		{SHA256: h, What: BlobChunkList, Data: make([]byte, 65536)},
	}
	for _, c := range cases {
		want, err := Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendBlobChunk(nil, &c)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: AppendBlobChunk %x, Marshal %x", c.Index, got[:min(len(got), 64)], want[:min(len(want), 64)])
		}
		if f := BlobChunkFrame(&c); f[0] != byte(FrameBlobChunk) || !bytes.Equal(f[1:], want) || cap(f) < len(f) {
			t.Fatal("BlobChunkFrame differs")
		}
		checkWire(t, want)
		var fast BlobChunk
		if !decodeBlobChunk(want, &fast) || !sameChunk(fast, c) {
			t.Fatalf("canonical form of %+v not decoded directly", c.Index)
		}
	}
	c := AppendBlobChunk(nil, &BlobChunk{SHA256: h, What: BlobChunkData, Index: 3, Data: []byte("abc")})
	for _, b := range [][]byte{
		append(c, 0),                      // trailing byte
		append([]byte{0xb8, 4}, c[1:]...), // long map head
		append(append([]byte{}, c[:38]...), 0x02, 0x00, 0x03, 0x43, 'a', 'b', 'c'), // index 0 spelt out
		{0xa3, 0x00, 0x58, 0x20},                                                               // cut short
		append(append([]byte{0xa3}, c[1:37]...), 0x03, 0x40),                                   // empty data
		append(append([]byte{}, c[:37]...), 0x18, 0x02, 0x02, 0x03, 0x03, 0x43, 'a', 'b', 'c'), // long What
	} {
		checkWire(t, b)
	}
}

// FuzzBlobChunkWire: on any input the direct decoder and the generic one
// agree, and AppendBlobChunk of what they decoded gives the input back.
func FuzzBlobChunkWire(f *testing.F) {
	h := Hash{9}
	for _, c := range []BlobChunk{
		{SHA256: h, What: BlobChunkData, Index: 3, Data: []byte("abc")},
		{SHA256: h, What: BlobUnavailable},
		{SHA256: h, What: BlobChunkList, Data: make([]byte, 64)},
		{SHA256: h, What: 30, Index: 300},
	} {
		f.Add(AppendBlobChunk(nil, &c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkWire(t, b)
		var c BlobChunk
		if decodeBlobChunk(b, &c) && !bytes.Equal(AppendBlobChunk(nil, &c), b) {
			t.Fatalf("%x: decoded and encoded again differs", b)
		}
	})
}

// TestBlobChunkDataFrame: a data frame filled in place is the frame
// BlobChunkFrame builds of the same chunk, at sizes around the heads'
// lengths, built anew or in the buffer of a frame of another index.
func TestBlobChunkDataFrame(t *testing.T) {
	h := Hash{7, 8, 9}
	var spare []byte
	for _, n := range []int{1, 23, 24, 255, 256, 65535, 65536, ChunkSize} {
		for _, index := range []uint32{0, 1, 24, 1 << 20, 300} {
			data := bytes.Repeat([]byte{byte(n)}, n)
			frame, slot := BlobChunkDataFrame(spare, h, index, n)
			spare = frame
			if len(slot) != n {
				t.Fatalf("%d bytes: a slot of %d", n, len(slot))
			}
			copy(slot, data)
			want := BlobChunkFrame(&BlobChunk{SHA256: h, What: BlobChunkData, Index: index, Data: data})
			if !bytes.Equal(frame, want) {
				t.Fatalf("%d bytes, chunk %d: frame %x, want %x", n, index, frame[:min(len(frame), 64)], want[:min(len(want), 64)])
			}
		}
	}
}
