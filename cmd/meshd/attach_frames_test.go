package main

import (
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// blobWantFrame is a blob-want frame asking for the chunk list of the
// blob sum, naming the envelope id sent by from.
func blobWantFrame(t *testing.T, from proto.PubKey, id string, sum [32]byte) []byte {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&proto.BlobWant{From: from, ID: u, SHA256: proto.Hash(sum)})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{byte(proto.FrameBlobWant)}, b...)
}

// blobChunkWhat reports the kind of a blob-chunk frame.
func blobChunkWhat(f []byte) (byte, bool) {
	if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameBlobChunk {
		return 0, false
	}
	c, err := proto.ParseBlobChunk(f[1:])
	if err != nil {
		return 0, false
	}
	return c.What, true
}
