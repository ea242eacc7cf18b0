package proto

import (
	"bytes"
	"errors"
	"testing"
)

// TestBlobFrames: the two transfer payloads round-trip, and their limits
// hold.
func TestBlobFrames(t *testing.T) {
	var h Hash
	h[0] = 9
	w := BlobWant{From: alice, ID: idN(1), SHA256: h, Chunks: []uint32{0, 5}}
	b, _ := Marshal(&w)
	got, err := ParseBlobWant(b)
	if err != nil || got.SHA256 != h || len(got.Chunks) != 2 {
		t.Fatalf("want: %v %+v", err, got)
	}
	many := w
	many.Chunks = make([]uint32, MaxWantChunks+1)
	b, _ = Marshal(&many)
	if _, err := ParseBlobWant(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("want of %d chunks: %v", len(many.Chunks), err)
	}
	for _, c := range []struct {
		c  BlobChunk
		ok bool
	}{
		{BlobChunk{SHA256: h, What: BlobChunkList, Data: make([]byte, 64)}, true},
		{BlobChunk{SHA256: h, What: BlobChunkData, Index: 3, Data: []byte("x")}, true},
		{BlobChunk{SHA256: h, What: BlobUnavailable}, true},
		{BlobChunk{SHA256: h, What: BlobChunkData, Data: make([]byte, ChunkSize+1)}, false},
		{BlobChunk{SHA256: h, What: BlobUnavailable, Data: []byte("x")}, false},
		{BlobChunk{SHA256: h, What: BlobNotYet, Index: 7}, true},
		{BlobChunk{SHA256: h, What: BlobNotYet}, true},
		{BlobChunk{SHA256: h, What: BlobNotYet, Index: 7, Data: []byte("x")}, false},
		{BlobChunk{SHA256: h, What: BlobNotYet, Index: MaxAttachmentChunks}, false},
		{BlobChunk{SHA256: h, What: 5}, false},
	} {
		b, _ := Marshal(&c.c)
		got, err := ParseBlobChunk(b)
		if (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.c.What, err)
		}
		if err == nil && (!bytes.Equal(got.Data, c.c.Data) || got.Index != c.c.Index) {
			t.Errorf("round trip of kind %d", c.c.What)
		}
	}
}

// FuzzBlobFrames: the transfer decoders never panic, and what they
// accept re-encodes to the same bytes within the limits.
func FuzzBlobFrames(f *testing.F) {
	var h Hash
	w, _ := Marshal(&BlobWant{From: alice, ID: idN(1), SHA256: h, Chunks: []uint32{1}})
	c, _ := Marshal(&BlobChunk{SHA256: h, What: BlobChunkData, Index: 2, Data: []byte("abc")})
	notYet, _ := Marshal(&BlobChunk{SHA256: h, What: BlobNotYet, Index: 9})
	for _, s := range [][]byte{w, c, notYet, {}, {0xa0}} {
		f.Add(s)
	}
	for _, frame := range blobFramesVector(f).fields { // vector 19's payloads
		f.Add(frame.val[1:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if w, err := ParseBlobWant(b); err == nil {
			again, _ := Marshal(w)
			if !bytes.Equal(again, b) || len(w.Chunks) > MaxWantChunks {
				t.Fatalf("accepted blob-want %x", b)
			}
		}
		if c, err := ParseBlobChunk(b); err == nil {
			again, _ := Marshal(c)
			if !bytes.Equal(again, b) || len(c.Data) > MaxAttachmentChunks*32 || (c.What == BlobNotYet && len(c.Data) > 0) {
				t.Fatalf("accepted blob-chunk %x", b)
			}
		}
	})
}
