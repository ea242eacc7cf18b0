package blobs

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/meshd/meshd/proto"
)

// TestReadPartInProgress: a part serves its chunk list and the chunks it
// holds verified, says ErrNotYet for the others (and for the list before
// it is known), keeps serving its durable chunks once closed (a part on
// disk), and the complete blob once finished.
func TestReadPartInProgress(t *testing.T) {
	data := content(5*proto.ChunkSize+11, 21)
	src, a := source(t, data)
	s := open(t, t.TempDir(), 0)
	buf := make([]byte, proto.ChunkSize)
	if h := s.Holding(a.SHA256); h != HoldsNothing {
		t.Fatalf("empty store holds %d", h)
	}
	if _, _, err := s.ReadVerifiedChunk(a, 0, buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("chunk of a blob not held: %v", err)
	}
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if h := s.Holding(a.SHA256); h != HoldsPart {
		t.Fatalf("store with a part holds %d", h)
	}
	if _, err := s.ChunkList(a); !errors.Is(err, ErrNotYet) {
		t.Fatalf("list of a part without one: %v", err)
	}
	if _, _, err := s.ReadVerifiedChunk(a, 0, buf); !errors.Is(err, ErrNotYet) {
		t.Fatalf("chunk of a part without a list: %v", err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ChunkList(a); err != nil || !bytes.Equal(EncodeChunkList(l), chunkList(t, src, a)) {
		t.Fatalf("list of a part: %v", err)
	}
	for _, i := range []int{1, 5} {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, part bool, held ...int) {
		t.Helper()
		for i := range a.Chunks() {
			b, fromPart, err := s.ReadVerifiedChunk(a, i, buf)
			switch {
			case slices.Contains(held, i) && (err != nil || !bytes.Equal(b, readChunk(t, src, a, i)) || fromPart != part):
				t.Fatalf("%s: chunk %d held: %v (from a part: %v)", when, i, err, fromPart)
			case !slices.Contains(held, i) && !errors.Is(err, ErrNotYet):
				t.Fatalf("%s: chunk %d not held: %v", when, i, err)
			}
		}
	}
	check("fetch under way", true, 1, 5)
	other := a
	other.Size++
	if _, _, err := s.ReadVerifiedChunk(other, 1, buf); !errors.Is(err, ErrMismatch) {
		t.Fatalf("chunk for another size: %v", err)
	}
	if err := p.Close(); err != nil { // checkpoints: both chunks durable
		t.Fatal(err)
	}
	check("part on disk", true, 1, 5)
	if h := s.Holding(a.SHA256); h != HoldsPart {
		t.Fatalf("store with a part on disk holds %d", h)
	}
	p, err = s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range p.Missing(0) {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	check("finished", false, 0, 1, 2, 3, 4, 5)
	if h := s.Holding(a.SHA256); h != HoldsComplete {
		t.Fatalf("store with the blob holds %d", h)
	}
}

// TestReadPartWhileWriting: readers of a part racing the fetch that
// writes and finishes it only ever get a chunk's verified bytes, or
// ErrNotYet; never another content, a short read or another error.
func TestReadPartWhileWriting(t *testing.T) {
	data := content(24*proto.ChunkSize+3, 22)
	src, a := source(t, data)
	s := open(t, t.TempDir(), 0)
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, a.Chunks())
	for i := range want {
		want[i] = readChunk(t, src, a, i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, proto.ChunkSize)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (k*7 + r) % a.Chunks()
				b, _, err := s.ReadVerifiedChunk(a, i, buf)
				if err == nil && !bytes.Equal(b, want[i]) {
					errs <- errors.New("a chunk read differs from the verified content")
					return
				}
				if err != nil && !errors.Is(err, ErrNotYet) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := a.Chunks() - 1; i >= 0; i-- {
		if err := p.WriteChunk(i, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
