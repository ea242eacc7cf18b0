package proto

import (
	"bytes"
	"reflect"
	"testing"
)

// blobFrames is the decoding each field of the blob frames vector must
// give back: a BlobWant or a BlobChunk, after the frame type byte.
type blobFrames map[string]any

// blobFramesVector is the transfer of vector 18's fix.patch (two chunks)
// in the frames of PROTOCOL.md §13.5, each field a whole frame (type
// byte, then payload): bob's wants naming vector 18's envelope, and the
// answers a node may give, "not yet" included.
func blobFramesVector(t testing.TB) vector {
	t.Helper()
	content := bytes.Repeat([]byte("+ok\n"), ChunkSize/4+1)
	a, chunks := attachmentOf(t, "fix.patch", "text/x-diff", content)
	var list []byte
	for _, c := range chunks {
		list = append(list, c[:]...)
	}
	frames := []struct {
		name string
		typ  FrameType
		v    any
	}{
		{"want_list", FrameBlobWant, &BlobWant{From: alice, ID: idN(0x18), SHA256: a.SHA256}},
		{"want_chunks", FrameBlobWant, &BlobWant{From: alice, ID: idN(0x18), SHA256: a.SHA256, Chunks: []uint32{0, 1}}},
		{"chunk_list", FrameBlobChunk, &BlobChunk{SHA256: a.SHA256, What: BlobChunkList, Data: list}},
		{"chunk_1", FrameBlobChunk, &BlobChunk{SHA256: a.SHA256, What: BlobChunkData, Index: 1, Data: content[ChunkSize:]}},
		{"not_yet_0", FrameBlobChunk, &BlobChunk{SHA256: a.SHA256, What: BlobNotYet}},
		{"not_yet_1", FrameBlobChunk, &BlobChunk{SHA256: a.SHA256, What: BlobNotYet, Index: 1}},
		{"unavailable", FrameBlobChunk, &BlobChunk{SHA256: a.SHA256, What: BlobUnavailable}},
	}
	v := vector{file: "19-blob-frames.txt", title: "attachment transfer frames (blob-want, blob-chunk)", blob: blobFrames{},
		notes: []string{
			"the blob is vector 18's fix.patch: size 262148, two chunks (262144 bytes, then \"+ok\\n\"),",
			"  sha256 " + a.SHA256.String() + ", chunk_root " + a.ChunkRoot.String(),
			"each field is a whole frame: the frame type byte (12 blob-want, 13 blob-chunk), then its payload",
			"want_list: bob asks for the chunk list, naming vector 18 (from alice, id 018bcfe5-6800-7000-8000-000000000018)",
			"want_chunks: the same, for chunks 0 and 1",
			"chunk_list: what 1, data the two chunk hashes; chunk_1: what 2, index 1, data \"+ok\\n\"",
			"not_yet_0: what 4 for chunk 0 (index 0 is absent); not_yet_1: what 4 for chunk 1",
			"unavailable: what 3, for a blob not held or not served to the asker",
		}}
	for _, f := range frames {
		b, err := Marshal(f.v)
		if err != nil {
			t.Fatal(err)
		}
		v.fields = append(v.fields, vecField{f.name, append([]byte{byte(f.typ)}, b...)})
		v.blob[f.name] = f.v
	}
	return v
}

// checkBlobFramesVector parses each stored frame strictly and compares it
// with the inputs it was built from.
func checkBlobFramesVector(t *testing.T, v *vector, f map[string][]byte) {
	t.Helper()
	for name, want := range v.blob {
		b := f[name]
		if len(b) == 0 {
			t.Fatalf("field %s missing", name)
		}
		var got any
		var err error
		switch FrameType(b[0]) {
		case FrameBlobWant:
			got, err = ParseBlobWant(b[1:])
		case FrameBlobChunk:
			got, err = ParseBlobChunk(b[1:])
		default:
			t.Fatalf("field %s: frame type %d", name, b[0])
		}
		if err != nil {
			t.Fatalf("field %s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("field %s decodes to %+v, want %+v", name, got, want)
		}
	}
}
