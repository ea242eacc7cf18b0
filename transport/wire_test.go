package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/proto"
)

// vectorKey is the fixed transport key of the known-answer vectors.
func vectorCipher(n uint64) *noise.CipherState {
	var k [32]byte
	for i := range k {
		k[i] = byte(i)
	}
	return noise.UnsafeNewCipherState(cipherSuite, k, n)
}

// TestRecordVectors pins the transport wire format: records sealed with
// key 00 01 .. 1f, nonces from 0, empty associated data. The expected
// bytes were computed independently (Python's cryptography package,
// ChaCha20-Poly1305 with nonce 00000000 || n as 64-bit little endian).
func TestRecordVectors(t *testing.T) {
	t.Parallel()
	l := &Link{send: newLinkCipher(vectorCipher(0))}
	w := writer{l: l}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"frame \"hi\" (nonce 0)", func() error { return w.frame([]byte("hi")) },
			"0013" + "19d02bbc387fb19a05117282ca44545f353a3b"},
		{"empty frame (nonce 1)", func() error { return w.frame(nil) },
			"0011" + "9e235d163cb0cc57452874cd334b650751"},
		{"ping (nonce 2)", func() error { return w.seal(hdrPing, nil) },
			"0011" + "ab63455917038a823674b0dc80cf657099"},
	}
	for _, s := range steps {
		l.wbuf = l.wbuf[:0]
		if err := s.do(); err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(l.wbuf); got != s.want {
			t.Errorf("%s:\n got %s\nwant %s", s.name, got, s.want)
		}
	}
	// And they decode with the receive side.
	r := vectorCipher(0)
	a := assembler{max: proto.MaxFrameSize}
	for _, s := range steps {
		rec, _ := hex.DecodeString(s.want)
		pt, err := r.Decrypt(nil, nil, rec[2:])
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if _, err := a.add(pt); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

func TestChunking(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, maxChunk - 1, maxChunk, maxChunk + 1, 3*maxChunk + 5, proto.MaxFrameSize} {
		l := &Link{send: newLinkCipher(vectorCipher(0))}
		w := writer{l: l}
		frame := bytes.Repeat([]byte{0xab}, n)
		var records [][]byte
		// Collect records without a conn: seal frame by frame and split.
		if err := w.frameNoFlush(frame); err != nil {
			t.Fatal(err)
		}
		for b := l.wbuf; len(b) > 0; {
			m := int(binary.BigEndian.Uint16(b))
			records = append(records, b[2:2+m])
			b = b[2+m:]
		}
		wantRecords := max(1, (n+maxChunk-1)/maxChunk)
		if len(records) != wantRecords {
			t.Fatalf("%d-byte frame: %d records, want %d", n, len(records), wantRecords)
		}
		r := vectorCipher(0)
		a := assembler{max: proto.MaxFrameSize}
		for i, rec := range records {
			if len(rec) > maxRecord || len(rec) < minTransport {
				t.Fatalf("record of %d bytes", len(rec))
			}
			pt, err := r.Decrypt(nil, nil, rec)
			if err != nil {
				t.Fatal(err)
			}
			last := i == len(records)-1
			if (pt[0] == hdrFinal) != last {
				t.Fatalf("record %d of %d has header %d", i, len(records), pt[0])
			}
			m, err := a.add(pt)
			if err != nil {
				t.Fatal(err)
			}
			if last && (m.kind != hdrFinal || !bytes.Equal(m.frame, frame)) {
				t.Fatalf("%d-byte frame did not reassemble", n)
			}
		}
	}
}

// frameNoFlush is writer.frame without the size-triggered flushes, for
// tests that have no connection.
func (w *writer) frameNoFlush(f []byte) error {
	for len(f) > maxChunk {
		if err := w.seal(hdrChunk, f[:maxChunk]); err != nil {
			return err
		}
		f = f[maxChunk:]
	}
	return w.seal(hdrFinal, f)
}

func TestReadRecordLimit(t *testing.T) {
	buf := make([]byte, 40)
	in := []byte{0x00, 0x29, 1, 2, 3} // claims 41 bytes
	r := bytes.NewReader(in)
	if _, err := readRecord(r, buf); !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v, want ErrProtocol", err)
	}
	if r.Len() != 3 {
		t.Errorf("read %d body bytes of an over-long record", 3-r.Len())
	}
	ok, _ := appendRecord(nil, make([]byte, 40))
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := readRecord(bytes.NewReader(ok), buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the bytes.Reader itself
		t.Errorf("readRecord allocates %.0f times", allocs)
	}
	if _, err := appendRecord(nil, make([]byte, maxRecord+1)); err == nil {
		t.Error("appendRecord accepted an over-long message")
	}
}

func TestAssemblerCap(t *testing.T) {
	t.Parallel()
	const limit = 10_000
	a := assembler{max: limit}
	chunk := append([]byte{hdrChunk}, make([]byte, 999)...)
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, err = a.add(chunk)
		if cap(a.buf) > limit {
			t.Fatalf("capacity %d beyond the cap", cap(a.buf))
		}
	}
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	// Exactly at the cap is fine.
	a = assembler{max: 4}
	a.add([]byte{hdrChunk, 1, 2})
	if m, err := a.add([]byte{hdrFinal, 3, 4}); err != nil || len(m.frame) != 4 {
		t.Fatalf("frame at the cap: %v", err)
	}
	if _, err := a.add([]byte{hdrFinal, 1, 2, 3, 4, 5}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("single message beyond the cap: %v", err)
	}
}

// TestAssemblerChunkFrameOneAlloc: a blob-chunk frame of a full chunk,
// in five records, is assembled in one buffer of its size, never copied
// to grow; and a small cap still holds.
func TestAssemblerChunkFrameOneAlloc(t *testing.T) {
	t.Parallel()
	frame := make([]byte, proto.ChunkSize+60)
	frame[0] = creditedFrame
	a := assembler{max: proto.MaxFrameSize}
	var got []byte
	var first *byte
	for off := 0; off < len(frame); off += maxChunk {
		end := min(off+maxChunk, len(frame))
		hdr := hdrChunk
		if end == len(frame) {
			hdr = hdrFinal
		}
		m, err := a.add(append([]byte{hdr}, frame[off:end]...))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = &a.buf[0]
		} else if a.buf != nil && &a.buf[0] != first {
			t.Fatal("the chunk frame's buffer was grown and copied")
		}
		got = m.frame
	}
	if !bytes.Equal(got, frame) || cap(got) > chunkFrameCap || &got[0] != first {
		t.Fatalf("frame of %d bytes, cap %d", len(got), cap(got))
	}
	a = assembler{max: 1000}
	if _, err := a.add(append([]byte{hdrChunk, creditedFrame}, make([]byte, 500)...)); err != nil || cap(a.buf) > 1000 {
		t.Fatalf("cap %d past the limit of 1000: %v", cap(a.buf), err)
	}
}
