package blobs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

func content(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func open(t *testing.T, dir string, max uint64) *Store {
	t.Helper()
	s, err := Open(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// source adds data to a fresh store and returns it with the attachment.
func source(t *testing.T, data []byte) (*Store, proto.Attachment) {
	t.Helper()
	s := open(t, t.TempDir(), 0)
	a, err := s.Add(bytes.NewReader(data), "f.bin", "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	return s, a
}

func chunkList(t *testing.T, s *Store, a proto.Attachment) []byte {
	t.Helper()
	l, err := s.Chunks(a)
	if err != nil {
		t.Fatal(err)
	}
	return EncodeChunkList(l)
}

func readChunk(t *testing.T, s *Store, a proto.Attachment, i int) []byte {
	t.Helper()
	c, err := s.ReadChunk(a, i, make([]byte, proto.ChunkSize))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(c)
}

// TestAddOneCopy: a blob added is visible with its chunk list, its chunks
// read back, and adding the same content again keeps one copy.
func TestAddOneCopy(t *testing.T) {
	data := content(2*proto.ChunkSize+100, 1)
	s, a := source(t, data)
	p, err := s.Path(a.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatal("stored content differs")
	}
	if a.Size != uint64(len(data)) || a.Chunks() != 3 {
		t.Fatalf("attachment %+v", a)
	}
	var joined []byte
	for i := range a.Chunks() {
		joined = append(joined, readChunk(t, s, a, i)...)
	}
	if !bytes.Equal(joined, data) {
		t.Fatal("chunks do not join to the content")
	}
	b, err := s.Add(bytes.NewReader(data), "other-name.bin", "text/plain")
	if err != nil || b.SHA256 != a.SHA256 {
		t.Fatalf("second add: %v", err)
	}
	hs, _ := s.List()
	if len(hs) != 1 {
		t.Fatalf("%d blobs after adding one content twice", len(hs))
	}
	lie := a
	lie.ChunkRoot[0] ^= 1
	if _, err := s.Chunks(lie); !errors.Is(err, ErrMismatch) {
		t.Fatalf("chunk list under a wrong root: %v", err)
	}
}

// TestAddTooLarge: content over the limit is refused and leaves nothing.
func TestAddTooLarge(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1000)
	if _, err := s.Add(bytes.NewReader(content(1001, 2)), "big", "text/plain"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "data"))
	if len(ents) != 0 {
		t.Fatalf("%d files left in data/", len(ents))
	}
	if _, err := s.Begin(proto.Attachment{Name: "big", Size: 1001}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("begin: %v, want ErrTooLarge", err)
	}
}

// TestFetchResumesAfterRestart: half the chunks written, the store
// closed and opened again: the fetch resumes with only the rest missing,
// and the blob is visible only once finished.
func TestFetchResumesAfterRestart(t *testing.T) {
	data := content(40*proto.ChunkSize+7, 3)
	src, a := source(t, data)
	dir := t.TempDir()
	s := open(t, dir, 0)
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if !p.NeedChunks() {
		t.Fatal("a new part knows its chunk list")
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Has(a.SHA256) {
		t.Fatal("a partial blob is visible")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal("second Close:", err)
	}

	s = open(t, dir, 0)
	p, err = s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.NeedChunks() {
		t.Fatal("the chunk list was not kept")
	}
	miss := p.Missing(0)
	if len(miss) != a.Chunks()-20 || miss[0] != 20 {
		t.Fatalf("missing after restart: %d from %v", len(miss), miss[:1])
	}
	if err := p.Finish(); err == nil {
		t.Fatal("finished with chunks missing")
	}
	for _, i := range miss {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Done() {
		t.Fatal("not done with every chunk")
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	path, err := s.Path(a.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("fetched content differs")
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "part")); len(ents) != 0 {
		t.Fatalf("%d part files left after finishing", len(ents))
	}
	if _, err := s.Begin(a); !errors.Is(err, ErrComplete) {
		t.Fatalf("begin of a stored blob: %v", err)
	}
}

// TestUncheckpointedChunksRefetched: chunks written since the last
// checkpoint are not trusted after a crash; they are fetched again.
func TestUncheckpointedChunksRefetched(t *testing.T) {
	src, a := source(t, content(4*proto.ChunkSize, 4))
	dir := t.TempDir()
	p, err := open(t, dir, 0).Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	// No Close: as if the process died.
	p2, err := open(t, dir, 0).Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p2.Missing(0)); got != 4 {
		t.Fatalf("%d chunks missing after a crash before a checkpoint, want 4", got)
	}
	_ = p.Close()
	_ = p2.Close()
}

// TestCorruptChunksRefused: a chunk that does not match its hash, a
// chunk of the wrong length or index, and a chunk list that does not
// match the root are refused and change nothing.
func TestCorruptChunksRefused(t *testing.T) {
	src, a := source(t, content(2*proto.ChunkSize+1, 5))
	s := open(t, t.TempDir(), 0)
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	list := chunkList(t, src, a)
	if err := p.WriteChunk(0, readChunk(t, src, a, 0)); err == nil {
		t.Fatal("chunk taken before the chunk list")
	}
	bad := bytes.Clone(list)
	bad[5] ^= 1
	if err := p.SetChunks(bad); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("tampered chunk list: %v", err)
	}
	if err := p.SetChunks(list[:32]); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("short chunk list: %v", err)
	}
	if err := p.SetChunks(list); err != nil {
		t.Fatal(err)
	}
	c := readChunk(t, src, a, 1)
	c[100] ^= 0xff
	for name, f := range map[string]func() error{
		"flipped byte": func() error { return p.WriteChunk(1, c) },
		"wrong index":  func() error { return p.WriteChunk(0, readChunk(t, src, a, 1)) },
		"short":        func() error { return p.WriteChunk(2, nil) },
		"out of range": func() error { return p.WriteChunk(3, readChunk(t, src, a, 2)) },
	} {
		if err := f(); !errors.Is(err, ErrBadChunk) {
			t.Errorf("%s: %v, want ErrBadChunk", name, err)
		}
	}
	if got := len(p.Missing(0)); got != 3 {
		t.Fatalf("%d missing after refused chunks, want 3", got)
	}
	if have, total := p.Progress(); have != 0 || total != 3 {
		t.Fatalf("progress %d/%d", have, total)
	}
}

// TestFinishRefusesWrongContent: chunks that match a chunk list that
// matches the chunk root, but whose whole does not match the SHA-256 the
// envelope signed (a sender that lied about the hash), never become
// visible, and the part is thrown away.
func TestFinishRefusesWrongContent(t *testing.T) {
	src, a := source(t, content(proto.ChunkSize+3, 6))
	lie := a
	lie.SHA256[0] ^= 1
	dir := t.TempDir()
	s := open(t, dir, 0)
	p, err := s.Begin(lie)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	for i := range a.Chunks() {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Finish(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("finish: %v, want ErrCorrupt", err)
	}
	if s.Has(lie.SHA256) || s.Has(a.SHA256) {
		t.Fatal("content under a wrong hash became visible")
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "part")); len(ents) != 0 {
		t.Fatalf("%d part files left after a corrupt finish", len(ents))
	}
}

// TestBeginMismatch: a second fetch of the same SHA-256 under another
// chunk root does not take over the one under way.
func TestBeginMismatch(t *testing.T) {
	_, a := source(t, content(100, 7))
	s := open(t, t.TempDir(), 0)
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	other := a
	other.ChunkRoot[0] ^= 1
	if _, err := s.Begin(other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("begin under another root: %v", err)
	}
	if q, err := s.Begin(a); err != nil || q != p {
		t.Fatalf("begin again: %v", err)
	}
}

// TestEmptyBlob: an empty attachment has no chunk and finishes once its
// (empty) chunk list is set. The part's hash loop here has looked before
// the list was known and waits for a chunk to be written (synctest.Wait
// parks it first, as a fetch whose list takes a round trip does); an empty
// blob has none, so setting the list must wake the loop, or Finish waits
// forever (it hung a README run).
func TestEmptyBlob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a := source(t, nil)
		s := open(t, t.TempDir(), 0)
		p, err := s.Begin(a)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the hash loop is parked, waiting for a chunk
		if err := p.SetChunks(nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Finish(); err != nil {
			t.Fatal(err)
		}
		if !s.Has(a.SHA256) {
			t.Fatal("empty blob not stored")
		}
	})
}

// TestRemove: a removed blob is gone, and removing it again is fine.
func TestRemove(t *testing.T) {
	s, a := source(t, content(10, 8))
	if err := s.Remove(a.SHA256); err != nil {
		t.Fatal(err)
	}
	if s.Has(a.SHA256) {
		t.Fatal("still there")
	}
	if err := s.Remove(a.SHA256); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointAfterInterval: a part checkpoints once checkpointInterval
// passed since its last checkpoint, however few chunks arrived since, so
// a slow transfer loses at most that much to a crash. The checkpoint runs
// in a goroutine of the part, beside the writes.
func TestCheckpointAfterInterval(t *testing.T) {
	src, a := source(t, content(4*proto.ChunkSize, 4))
	dir := t.TempDir()
	p, err := open(t, dir, 0).Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteChunk(0, readChunk(t, src, a, 0)); err != nil {
		t.Fatal(err)
	}
	p.s.mu.Lock()
	p.synced = p.synced.Add(-checkpointInterval) // as if a second went by
	p.s.mu.Unlock()
	if err := p.WriteChunk(1, readChunk(t, src, a, 1)); err != nil {
		t.Fatal(err)
	}
	p.ckWG.Wait() // the checkpoint runs beside the writes
	// No Close: as if the process died right after.
	p2, err := open(t, dir, 0).Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if got := p2.Missing(0); len(got) != 2 || got[0] != 2 {
		t.Fatalf("missing after a crash past the interval: %v, want [2 3]", got)
	}
	_ = p.Close()
	_ = p2.Close()
}

// TestFinishOutOfOrder: chunks that arrive in any order (here in
// reverse, in two halves, and the middle one last) still make the whole
// content, which Finish checks against the signed SHA-256; the part's
// hasher takes the chunks present in order as they come, stops at a gap
// and goes on once it is filled, so Finish has none left.
func TestFinishOutOfOrder(t *testing.T) {
	data := content(9*proto.ChunkSize+11, 8)
	src, a := source(t, data)
	s := open(t, t.TempDir(), 0)
	p, err := s.Begin(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetChunks(chunkList(t, src, a)); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{9, 8, 7, 6, 5, 0, 1, 2, 3} {
		if err := p.WriteChunk(i, readChunk(t, src, a, i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := waitHashed(p, 4); got != 4 {
		t.Fatalf("hashed %d chunks in order, want 4", got)
	}
	if err := p.WriteChunk(4, readChunk(t, src, a, 4)); err != nil {
		t.Fatal(err)
	}
	if got := waitHashed(p, 10); got != 10 {
		t.Fatalf("hashed %d chunks once the gap filled, want all 10", got)
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	path, _ := s.Path(a.SHA256)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Fatal("fetched content differs")
	}
}

// waitHashed waits until p's hasher has taken n chunks (at most 10 s),
// and returns how many it has taken.
func waitHashed(p *Part, n int) int {
	hashed := func() int {
		p.s.mu.Lock()
		defer p.s.mu.Unlock()
		return p.hashed
	}
	testwait.Until(10*time.Second, func() bool { return hashed() >= n })
	return hashed()
}

// TestCopyInDigest: the store's one-pass copy gives what proto.Digest
// gives, and the bytes it copied, at sizes around its block and chunk
// boundaries.
func TestCopyInDigest(t *testing.T) {
	sizes := []int{0, 1, proto.ChunkSize, copyInBlock - 1, copyInBlock, copyInBlock + 1, 3*copyInBlock + 5,
		copyInPiece - 1, copyInPiece, copyInPiece + 1, 2*copyInPiece + copyInBlock + 3}
	for _, fromFile := range []bool{false, true} {
		for _, n := range sizes {
			testCopyIn(t, n, fromFile)
		}
	}
}

// testCopyIn copies n bytes from a reader, or from a file (the kernel's
// copy), and checks the copy and its hashes.
func testCopyIn(t *testing.T, n int, fromFile bool) {
	t.Helper()
	data := content(n, uint64(n))
	dir := t.TempDir()
	var r io.Reader = bytes.NewReader(data)
	if fromFile {
		src := filepath.Join(dir, "src")
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sf, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		r = sf
	}
	f, err := os.Create(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	size, sum, chunks, err := copyIn(r, int64(n)+1, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	wsize, wsum, _, wchunks, _ := proto.Digest(bytes.NewReader(data))
	if size != wsize || sum != wsum || len(chunks) != len(wchunks) {
		t.Fatalf("%d bytes: copyIn %d %s %d chunks, Digest %d %s %d", n, size, sum, len(chunks), wsize, wsum, len(wchunks))
	}
	for i := range chunks {
		if chunks[i] != wchunks[i] {
			t.Fatalf("%d bytes: chunk %d hash differs", n, i)
		}
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, data) {
		t.Fatalf("%d bytes: copy differs", n)
	}
}
