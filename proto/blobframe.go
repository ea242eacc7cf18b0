package proto

import (
	"fmt"

	"github.com/google/uuid"
)

// MaxWantChunks bounds the chunks one blob-want asks for.
const MaxWantChunks = 64

// BlobWant asks a peer for an attachment (PROTOCOL.md §13.5). It names
// the envelope that lists the attachment, by (from, id), so the peer can
// check that the asker may read it: knowing a hash is not enough.
// Wire: {0: from, 1: id, 2: sha256, ? 3: [+ uint] chunk indexes}. Without
// key 3 it asks for the chunk hash list.
type BlobWant struct {
	From   PubKey    `cbor:"0,keyasint"`
	ID     uuid.UUID `cbor:"1,keyasint"`
	SHA256 Hash      `cbor:"2,keyasint"`
	Chunks []uint32  `cbor:"3,keyasint,omitempty"`
}

// ParseBlobWant decodes a blob-want payload strictly and canonically.
func ParseBlobWant(b []byte) (*BlobWant, error) {
	var w BlobWant
	if err := UnmarshalCanonical(b, &w); err != nil {
		return nil, fmt.Errorf("blob-want: %w", err)
	}
	if len(w.Chunks) > MaxWantChunks {
		return nil, fmt.Errorf("blob-want: %w: %d chunks, at most %d", ErrMalformed, len(w.Chunks), MaxWantChunks)
	}
	for _, c := range w.Chunks {
		if c >= MaxAttachmentChunks {
			return nil, fmt.Errorf("blob-want: %w: chunk %d, at most %d", ErrMalformed, c, MaxAttachmentChunks-1)
		}
	}
	return &w, nil
}

// BlobChunk kinds. ONLY APPEND.
const (
	// BlobChunkList: Data is the attachment's chunk hash list.
	BlobChunkList uint8 = 1
	// BlobChunkData: Data is chunk Index.
	BlobChunkData uint8 = 2
	// BlobUnavailable: the sender does not serve this blob to the
	// receiver (it lacks it, or the receiver may not read it).
	BlobUnavailable uint8 = 3
	// BlobNotYet: the sender serves this blob to the receiver and holds
	// part of it, but not chunk Index yet (PROTOCOL.md §13.5); ask again
	// later, or another holder.
	BlobNotYet uint8 = 4
)

// BlobChunk answers a [BlobWant]. Wire: {0: sha256, 1: what, ? 2: index,
// ? 3: data}. Index is a chunk's (what 2) or the chunk not held yet
// (what 4).
type BlobChunk struct {
	SHA256 Hash   `cbor:"0,keyasint"`
	What   uint8  `cbor:"1,keyasint"`
	Index  uint32 `cbor:"2,keyasint,omitempty"`
	Data   []byte `cbor:"3,keyasint,omitempty"`
}

// ParseBlobChunk decodes a blob-chunk payload strictly and canonically.
// It does not check the data against any hash: the receiver does. The
// returned Data aliases b (no copy of a chunk is made).
func ParseBlobChunk(b []byte) (*BlobChunk, error) {
	var c BlobChunk
	if !decodeBlobChunk(b, &c) {
		c = BlobChunk{}
		if err := UnmarshalCanonical(b, &c); err != nil {
			return nil, fmt.Errorf("blob-chunk: %w", err)
		}
	}
	switch c.What {
	case BlobChunkList:
		if len(c.Data) > MaxAttachmentChunks*len(c.SHA256) || c.Index != 0 {
			return nil, fmt.Errorf("blob-chunk: %w: chunk list of %d bytes", ErrMalformed, len(c.Data))
		}
	case BlobChunkData:
		if len(c.Data) > ChunkSize || c.Index >= MaxAttachmentChunks {
			return nil, fmt.Errorf("blob-chunk: %w: chunk %d of %d bytes", ErrMalformed, c.Index, len(c.Data))
		}
	case BlobUnavailable:
		if len(c.Data) > 0 || c.Index != 0 {
			return nil, fmt.Errorf("blob-chunk: %w: a refusal with data", ErrMalformed)
		}
	case BlobNotYet:
		if len(c.Data) > 0 || c.Index >= MaxAttachmentChunks {
			return nil, fmt.Errorf("blob-chunk: %w: a not-yet for chunk %d with %d bytes of data", ErrMalformed, c.Index, len(c.Data))
		}
	default:
		return nil, fmt.Errorf("blob-chunk: %w: unknown kind %d", ErrMalformed, c.What)
	}
	return &c, nil
}
