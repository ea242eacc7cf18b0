package blobs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
)

// ErrComplete is returned by [Store.Begin] when the blob is already in
// the store: there is nothing to fetch.
var ErrComplete = errors.New("blob already complete")

// A part checkpoints its bitmap (each time an fsync of the data first)
// once checkpointEvery chunks arrived since the last checkpoint, or
// checkpointInterval passed since it with at least one new chunk: a
// crash loses at most about a second's worth of chunks, and a fast
// transfer does not stall its link's reader on an fsync every few MiB
// (on loopback the data fsyncs, each 4 MiB, took a third of the
// transfer's time; docs/BENCHMARKS.md).
const (
	checkpointEvery    = 256
	checkpointInterval = time.Second
)

// Part is a blob being fetched: its chunks arrive in any order, from any
// peer, and each is verified before it is written. Its methods are safe
// for concurrent use.
type Part struct {
	s *Store
	a proto.Attachment

	ck   sync.Mutex     // held by a checkpoint, Finish, Close and Remove: before s.mu
	ckWG sync.WaitGroup // the checkpoint goroutine (checkpointSoonLocked)

	// guarded by s.mu
	f       *os.File
	chunks  []proto.Hash // nil until the chunk list is known
	have    []bool
	missing int
	dirty   int
	closed  bool
	ckBusy  bool      // a checkpoint goroutine is under way
	ckErr   error     // why the last checkpoint failed, for WriteChunk
	synced  time.Time // the last checkpoint, or the part's start
	hashed  int       // chunks [0, hashed) are in whole

	// The whole content's SHA-256 is taken in order by a goroutine of
	// the part (hashLoop), which reads the chunks back from the part
	// file as they become present, beside the writes rather than in
	// their way; Finish then waits for the last few. Each byte is
	// hashed twice, and neither hash is redundant: a chunk's hash
	// rejects a bad chunk as it arrives, before it is written or served
	// on, and passes over the peer that sent it; the whole's is what the
	// store is named by and the signature covers, and the chunks can all
	// match a chunk root whose content does not match it (a sender that
	// signed a wrong SHA-256), which the store must never hold under
	// that name.
	whole    hash.Hash     // owned by hashLoop until hashDone
	hashErr  error         // why hashLoop stopped short; read after hashDone
	hashWake chan struct{} // capacity 1: a chunk was written
	hashStop chan struct{} // closed when the part closes
	hashDone chan struct{} // closed when hashLoop has ended
}

// Begin starts the fetch of attachment a, or resumes it where an earlier
// one (in this process or before a restart) stopped. It returns
// ErrComplete when the blob is already stored, ErrTooLarge when a is over
// the store's limit, and ErrMismatch when a part of the same SHA-256 is
// under way for another size or chunk root.
func (s *Store) Begin(a proto.Attachment) (*Part, error) {
	if a.Size > s.max {
		return nil, fmt.Errorf("%w: %s is %d bytes, over %d", ErrTooLarge, a.Name, a.Size, s.max)
	}
	if s.Has(a.SHA256) {
		if _, err := s.Chunks(a); err != nil {
			return nil, err
		}
		return nil, ErrComplete
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.parts[a.SHA256]; p != nil {
		if p.a.Size != a.Size || p.a.ChunkRoot != a.ChunkRoot {
			return nil, fmt.Errorf("%w: a fetch of %s is under way for another size or chunk root", ErrMismatch, a.SHA256)
		}
		return p, nil
	}
	p := &Part{s: s, a: a, synced: time.Now(), whole: sha256.New(),
		hashWake: make(chan struct{}, 1), hashStop: make(chan struct{}), hashDone: make(chan struct{})}
	if err := p.load(); err != nil {
		return nil, err
	}
	s.parts[a.SHA256] = p
	go p.hashLoop()
	return p, nil
}

// load opens the part file and the state an earlier fetch left.
func (p *Part) load() error {
	base := p.s.partPath(p.a.SHA256)
	if b, err := os.ReadFile(base + ".chunks"); err == nil {
		size, root, list, err := decodeChunks(b)
		if err != nil || size != p.a.Size || root != p.a.ChunkRoot {
			return fmt.Errorf("%w: a fetch of %s was begun for another size or chunk root", ErrMismatch, p.a.SHA256)
		}
		p.setChunks(list)
		if have, err := os.ReadFile(base + ".have"); err == nil && len(have) == len(list) {
			for i, c := range have {
				if c == 1 {
					p.have[i] = true
					p.missing--
				}
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob store: %w", err)
	}
	f, err := os.OpenFile(base, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	p.f = f
	return nil
}

func (p *Part) setChunks(list []proto.Hash) {
	p.chunks, p.have, p.missing = list, make([]bool, len(list)), len(list)
	// hashLoop may be waiting, having looked before the list was known:
	// an empty blob has no chunk whose write would wake it.
	select {
	case p.hashWake <- struct{}{}:
	default:
	}
}

// Attachment is the attachment being fetched.
func (p *Part) Attachment() proto.Attachment { return p.a }

// NeedChunks reports whether the chunk hash list is still unknown.
func (p *Part) NeedChunks() bool {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.chunks == nil
}

// SetChunks takes the chunk hash list a peer sent (wire form), after
// checking it against the attachment's chunk root (ErrBadChunk if not),
// and records it so that a restart does not need it again.
func (p *Part) SetChunks(b []byte) error {
	list, err := ParseChunkList(b, p.a)
	if err != nil {
		return err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.closed {
		return fmt.Errorf("blob store: fetch of %s closed", p.a.SHA256)
	}
	if p.chunks != nil {
		return nil
	}
	if err := fsutil.WriteAtomic(p.s.partPath(p.a.SHA256)+".chunks", encodeChunks(p.a.Size, p.a.ChunkRoot, list), 0o600); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	p.setChunks(list)
	return nil
}

// Missing returns the indexes of the chunks not yet present, at most max
// of them (all when max <= 0); nil until the chunk list is known.
func (p *Part) Missing(max int) []int {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	var out []int
	for i, ok := range p.have {
		if !ok {
			out = append(out, i)
			if max > 0 && len(out) == max {
				break
			}
		}
	}
	return out
}

// Progress returns how many chunks are present, and how many there are
// (-1 while the chunk list is unknown).
func (p *Part) Progress() (have, total int) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if p.chunks == nil {
		return 0, -1
	}
	return len(p.chunks) - p.missing, len(p.chunks)
}

// Done reports whether every chunk is present.
func (p *Part) Done() bool {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.chunks != nil && p.missing == 0
}

// WriteChunk verifies chunk i against its hash (ErrBadChunk if it does
// not match, and nothing is written) and writes it. A chunk already
// present is ignored. The chunk is hashed without the store's lock held
// (the chunk list does not change once set).
func (p *Part) WriteChunk(i int, data []byte) error {
	p.s.mu.Lock()
	chunks := p.chunks
	p.s.mu.Unlock()
	switch {
	case chunks == nil:
		return fmt.Errorf("blob store: chunk %d of %s before its chunk list", i, p.a.SHA256)
	case i < 0 || i >= len(chunks):
		return fmt.Errorf("%w: chunk %d of %d", ErrBadChunk, i, len(chunks))
	case len(data) != proto.ChunkLen(p.a.Size, i):
		return fmt.Errorf("%w: chunk %d of %d bytes, want %d", ErrBadChunk, i, len(data), proto.ChunkLen(p.a.Size, i))
	case sha256.Sum256(data) != chunks[i]:
		return fmt.Errorf("%w: chunk %d of %s", ErrBadChunk, i, p.a.SHA256)
	}
	p.s.mu.Lock()
	switch {
	case p.closed:
		p.s.mu.Unlock()
		return fmt.Errorf("blob store: fetch of %s closed", p.a.SHA256)
	case p.have[i]:
		p.s.mu.Unlock()
		return nil
	}
	f := p.f
	p.s.mu.Unlock()
	// The write waits on the page cache and the writeback request on the
	// disk's queue: neither holds the store's lock, which the fetch's next
	// wants, the whole's hash and every other part take meanwhile (held
	// here, the fetch's loop waited for it 0.7 s of a 2.4 s transfer;
	// docs/BENCHMARKS.md). Chunks go to offsets of their own, and a chunk
	// written twice writes the same verified bytes; a part closed
	// meanwhile fails the write, or takes bytes its bitmap does not name.
	off := int64(i) * proto.ChunkSize
	if _, err := f.WriteAt(data, off); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	startWriteback(f, off, len(data))
	p.s.mu.Lock()
	if p.closed {
		p.s.mu.Unlock()
		return fmt.Errorf("blob store: fetch of %s closed", p.a.SHA256)
	}
	if !p.have[i] {
		p.have[i] = true
		p.missing--
		if i == p.hashed {
			select {
			case p.hashWake <- struct{}{}:
			default:
			}
		}
		p.dirty++
	}
	if p.dirty >= checkpointEvery || (p.dirty > 0 && time.Since(p.synced) >= checkpointInterval) {
		p.checkpointSoonLocked()
	}
	err := p.ckErr
	p.ckErr = nil
	p.s.mu.Unlock()
	return err
}

// checkpointSoonLocked starts a checkpoint in a goroutine of the part,
// unless one is under way: its fsync waits for the disk, and the chunk
// writer goes on writing meanwhile (behind a synchronous fsync of 64 MiB
// the whole transfer stood still for 0.8 s; docs/BENCHMARKS.md), though
// its writes may still wait on the file system's journal. An error is
// kept for the next WriteChunk to return.
func (p *Part) checkpointSoonLocked() {
	if p.ckBusy || p.closed {
		return
	}
	p.ckBusy = true
	p.ckWG.Add(1)
	go func() {
		defer p.ckWG.Done()
		p.ck.Lock()
		err := p.checkpoint()
		p.ck.Unlock()
		p.s.mu.Lock()
		p.ckBusy = false
		if err != nil && !p.closed {
			p.ckErr = err
		}
		p.s.mu.Unlock()
	}()
}

// hashRun is how many chunks hashLoop reads back at a time.
const hashRun = 4

// hashLoop adds to the whole content's hash the chunks present from
// p.hashed on, in order, reading them back from the part file (mapped
// where it can: readBack) without the store's lock, until every chunk is
// in it or the part closes.
func (p *Part) hashLoop() {
	defer close(p.hashDone)
	var buf []byte
	for {
		p.s.mu.Lock()
		next, end, total := p.hashed, p.hashed, len(p.have)
		for end < total && end-next < hashRun && p.have[end] {
			end++
		}
		over := p.closed || (p.chunks != nil && next == total)
		p.s.mu.Unlock()
		switch {
		case over:
			return
		case end == next:
			select {
			case <-p.hashWake:
			case <-p.hashStop:
			}
			continue
		}
		if buf == nil && readBackBuf {
			buf = make([]byte, hashRun*proto.ChunkSize)
		}
		off := int64(next) * proto.ChunkSize
		b, done, err := readBack(p.f, off, int(min(int64(end-next)*proto.ChunkSize, int64(p.a.Size)-off)), buf)
		if err != nil {
			p.hashErr = err // or the part closed meanwhile
			return
		}
		p.whole.Write(b)
		done()
		p.s.mu.Lock()
		p.hashed = end
		p.s.mu.Unlock()
	}
}

// checkpoint makes the chunks written so far durable, then records them
// in the bitmap: a chunk the bitmap names is on disk. The caller holds
// p.ck, which orders checkpoints (a later bitmap is written later) and
// keeps them from Finish, Close and Remove; the fsync goes without the
// store's lock.
func (p *Part) checkpoint() error {
	p.s.mu.Lock()
	if p.closed || p.chunks == nil || p.dirty == 0 {
		p.s.mu.Unlock()
		return nil
	}
	bm := make([]byte, len(p.have))
	for i, ok := range p.have {
		if ok {
			bm[i] = 1
		}
	}
	f, dirty := p.f, p.dirty
	p.dirty, p.synced = 0, time.Now()
	p.s.mu.Unlock()
	err := f.Sync()
	if err == nil {
		err = fsutil.WriteAtomic(p.s.partPath(p.a.SHA256)+".have", bm, 0o600)
	}
	if err != nil {
		p.s.mu.Lock()
		p.dirty += dirty // the next chunk tries again
		p.s.mu.Unlock()
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}

// Finish checks the whole content against the attachment's SHA-256 and,
// if it matches, makes the blob visible in the store and ends the part.
// If it does not (ErrCorrupt), the part is thrown away and the fetch
// starts again from nothing. The fsync of the part and the hashing of
// its last chunks overlap.
func (p *Part) Finish() error {
	p.ck.Lock()
	err := p.finish()
	p.ck.Unlock()
	p.ckWG.Wait() // a checkpoint started before has nothing left to do
	return err
}

func (p *Part) finish() error {
	p.s.mu.Lock()
	if p.closed || p.chunks == nil || p.missing > 0 {
		p.s.mu.Unlock()
		return fmt.Errorf("blob store: %s is not complete", p.a.SHA256)
	}
	p.s.mu.Unlock()
	if err := p.f.Sync(); err != nil { // closed meanwhile: an error, nothing worse
		return fmt.Errorf("blob store: %w", err)
	}
	<-p.hashDone // every chunk is present: it hashes them all, or the part closed
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("blob store: fetch of %s closed", p.a.SHA256)
	case p.hashErr != nil:
		return fmt.Errorf("blob store: %w", p.hashErr)
	}
	if p.hashed != len(p.chunks) || !bytes.Equal(p.whole.Sum(nil), p.a.SHA256[:]) {
		p.discardLocked()
		return fmt.Errorf("%w: %s", ErrCorrupt, p.a.SHA256)
	}
	if err := p.f.Truncate(int64(p.a.Size)); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	p.closeLocked()
	delete(p.s.parts, p.a.SHA256)
	base := p.s.partPath(p.a.SHA256)
	if err := p.s.publish(base, p.a, p.chunks); err != nil {
		return err
	}
	_ = os.Remove(base + ".have")
	_ = os.Remove(base + ".chunks")
	return nil
}

// Close checkpoints the part and releases it; a later Begin resumes it.
// Close is idempotent.
func (p *Part) Close() error {
	p.ck.Lock()
	err := p.checkpoint()
	p.s.mu.Lock()
	if p.closed {
		p.s.mu.Unlock()
		p.ck.Unlock()
		<-p.hashDone
		return nil
	}
	p.closeLocked()
	delete(p.s.parts, p.a.SHA256)
	p.s.mu.Unlock()
	p.ck.Unlock()
	p.ckWG.Wait() // a checkpoint started before has nothing left to do
	<-p.hashDone
	return err
}

// closeLocked closes the part's file and stops its hashLoop (which ends
// soon after; Close waits for it, a caller holding the lock cannot).
func (p *Part) closeLocked() {
	if !p.closed {
		_ = p.f.Close()
		p.closed = true
		close(p.hashStop)
	}
}

// discardLocked closes the part and removes its files.
func (p *Part) discardLocked() {
	p.closeLocked()
	delete(p.s.parts, p.a.SHA256)
	base := p.s.partPath(p.a.SHA256)
	for _, f := range []string{base, base + ".chunks", base + ".have"} {
		_ = os.Remove(f)
	}
}
