package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

// TestRecvReaderBorrowsBySize: a record of a few kilobytes is read into
// a mid-sized buffer, a longer one that follows it, with bytes of it
// already read, moves to a record-sized buffer intact, and the reader
// holds no buffer once it has nothing unread.
func TestRecvReaderBorrowsBySize(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	rec := func(n int, fill byte) []byte {
		r := make([]byte, 2+n)
		binary.BigEndian.PutUint16(r, uint16(n))
		copy(r[2:], bytes.Repeat([]byte{fill}, n))
		return r
	}
	small, large := rec(10<<10, 'a'), rec(40<<10, 'b')
	go func() {
		// The first record and the start of the second in one write.
		_, _ = a.Write(append(append([]byte{}, small...), large[:1000]...))
		_, _ = a.Write(large[1000:])
	}()
	rr := newRecvReader(b, bufio.NewReader(bytes.NewReader(nil)))
	got, err := rr.record()
	if err != nil || !bytes.Equal(got, small[2:]) {
		t.Fatalf("first record: %v, %d bytes", err, len(got))
	}
	if rr.big == nil || len(*rr.big) != midReadSize {
		t.Fatalf("a %d-byte record borrowed %d bytes, want %d", len(got), len(rr.buf), midReadSize)
	}
	got, err = rr.record()
	if err != nil || !bytes.Equal(got, large[2:]) {
		t.Fatalf("second record: %v, %d bytes", err, len(got))
	}
	if len(*rr.big) != bigReadSize {
		t.Fatalf("a %d-byte record is held in %d bytes", len(got), len(rr.buf))
	}
	rr.idle()
	if rr.big != nil {
		t.Fatal("the buffer was not given back once nothing was left unread")
	}
}
