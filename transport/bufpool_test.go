package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// TestRecvReaderBorrowsBySize: a record of a few kilobytes is read into
// a mid-sized buffer, a longer one that follows it, with bytes of it
// already read, moves to a record-sized buffer intact, and the reader
// holds no buffer once it has nothing unread.
func TestRecvReaderBorrowsBySize(t *testing.T) {
	t.Parallel()
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

// chunkConn hands out its bytes in reads of the sizes it is given in
// turn, as a socket would.
type chunkConn struct {
	net.Conn
	r     *bytes.Reader
	sizes []byte
	i     int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if c.r.Len() == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		s := int(c.sizes[c.i%len(c.sizes)])*257 + 1 // 1 byte to 64 KiB
		c.i++
		n = min(n, s)
	}
	return c.r.Read(p[:n])
}

// FuzzRecvReader reads arbitrary bytes, arriving in reads of arbitrary
// sizes, with the link's reader (small, 16 KiB and 64 KiB buffers, moved
// between as records come) and with readRecord into one fixed buffer,
// and checks that both give the same records and end alike, and that
// the reader holds no buffer when it has nothing unread.
func FuzzRecvReader(f *testing.F) {
	rec := func(n int) []byte {
		r := make([]byte, 2+n)
		binary.BigEndian.PutUint16(r, uint16(n))
		for i := range n {
			r[2+i] = byte(i)
		}
		return r
	}
	f.Add([]byte{}, append(rec(10), rec(20000)...))
	f.Add([]byte{2, 0, 255}, append(append(rec(600), rec(15000)...), rec(65535)...))
	f.Add([]byte{1}, append(rec(100), 0xff))
	f.Fuzz(func(t *testing.T, sizes, data []byte) {
		var want [][]byte
		var wantErr error
		buf := make([]byte, bigReadSize)
		ref := bytes.NewReader(data)
		for {
			r, err := readRecord(ref, buf)
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, bytes.Clone(r))
		}
		rr := newRecvReader(&chunkConn{r: bytes.NewReader(data), sizes: sizes}, bufio.NewReader(bytes.NewReader(nil)))
		for i := 0; ; i++ {
			r, err := rr.record()
			if err != nil {
				if i != len(want) {
					t.Fatalf("reader ended after %d records (%v), readRecord read %d", i, err, len(want))
				}
				if (err == io.EOF) != (wantErr == io.EOF) {
					t.Fatalf("reader ended with %v, readRecord with %v", err, wantErr)
				}
				break
			}
			if i >= len(want) || !bytes.Equal(r, want[i]) {
				t.Fatalf("record %d differs", i)
			}
			rr.idle()
			if rr.buffered() == 0 && rr.big != nil {
				t.Fatal("a buffer is held with nothing unread")
			}
		}
		rr.release()
	})
}
