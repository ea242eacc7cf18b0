package blobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/meshd/meshd/proto"
)

// Reading what the store holds of a blob, complete or not, so that a node
// serves the chunks of a part it is still fetching (PROTOCOL.md §13.5).
// A chunk of a part is readable only once it is verified and written: a
// part open in this process names it in its bitmap after WriteChunk wrote
// it; a part on disk with no fetch running, after a checkpoint made it
// durable. Reads of a part hold the store's lock, so a fetch writing,
// finishing or discarding the part at the same time never shows a chunk
// half written or one of another content.

// ErrNotYet: the store holds a part of the blob, but not the chunk (or
// not yet the chunk list) asked for.
var ErrNotYet = errors.New("chunk not held yet")

// Holding is what the store holds of one blob.
type Holding int

// What [Store.Holding] reports.
const (
	HoldsNothing  Holding = iota // neither the blob nor a part of it
	HoldsPart                    // a part: a fetch under way, or its files on disk
	HoldsComplete                // the complete, verified blob
)

// Holding reports what the store holds of blob h.
func (s *Store) Holding(h proto.Hash) Holding {
	if s.Has(h) {
		return HoldsComplete
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[h] != nil {
		return HoldsPart
	}
	if _, err := os.Stat(s.partPath(h)); err == nil {
		return HoldsPart
	}
	if s.Has(h) { // finished while the lock was taken
		return HoldsComplete
	}
	return HoldsNothing
}

// ChunkList returns a's verified chunk hash list, from the complete blob
// or from a part that holds it. It returns ErrNotYet for a part still
// without its list, ErrNotFound when the store holds neither, and
// ErrMismatch when the blob or part is of another size or chunk root.
func (s *Store) ChunkList(a proto.Attachment) ([]proto.Hash, error) {
	if list, err := s.Chunks(a); !errors.Is(err, ErrNotFound) {
		return list, err
	}
	s.mu.Lock()
	list, _, err := s.partStateLocked(a, false)
	s.mu.Unlock()
	if errors.Is(err, ErrNotFound) && s.Has(a.SHA256) {
		return s.Chunks(a)
	}
	return list, err
}

// ReadVerifiedChunk reads chunk i of a into buf (which must hold the
// chunk: proto.ChunkLen bytes): from the complete blob, or from a part that
// holds the chunk verified and written (then fromPart is true). It
// returns ErrNotYet when a part lacks the chunk, and ErrNotFound when
// the store holds neither.
func (s *Store) ReadVerifiedChunk(a proto.Attachment, i int, buf []byte) (b []byte, fromPart bool, err error) {
	if i < 0 || i >= a.Chunks() {
		return nil, false, fmt.Errorf("blob store: chunk %d of %d", i, a.Chunks())
	}
	if b, err := s.ReadChunk(a, i, buf); !errors.Is(err, ErrNotFound) {
		return b, false, err
	}
	s.mu.Lock()
	b, err = s.readPartChunkLocked(a, i, buf)
	s.mu.Unlock()
	if errors.Is(err, ErrNotFound) && s.Has(a.SHA256) { // finished meanwhile
		b, err = s.ReadChunk(a, i, buf)
		return b, false, err
	}
	return b, err == nil, err
}

func (s *Store) readPartChunkLocked(a proto.Attachment, i int, buf []byte) ([]byte, error) {
	_, have, err := s.partStateLocked(a, true)
	if err != nil {
		return nil, err
	}
	if !have[i] {
		return nil, fmt.Errorf("%w: chunk %d of %s", ErrNotYet, i, a.SHA256)
	}
	n := proto.ChunkLen(a.Size, i)
	off := int64(i) * proto.ChunkSize
	if p := s.parts[a.SHA256]; p != nil {
		if _, err := p.f.ReadAt(buf[:n], off); err != nil {
			return nil, fmt.Errorf("%w: read chunk %d of part %s: %w", ErrCorrupt, i, a.SHA256, err)
		}
		return buf[:n], nil
	}
	f, err := os.Open(s.partPath(a.SHA256))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, a.SHA256)
	}
	defer f.Close()
	if _, err := f.ReadAt(buf[:n], off); err != nil {
		return nil, fmt.Errorf("%w: read chunk %d of part %s: %w", ErrCorrupt, i, a.SHA256, err)
	}
	return buf[:n], nil
}

// partStateLocked returns the chunk list of a's part and, if withHave,
// which chunks it holds verified: from the part open in this process,
// else from the part's files on disk (the bitmap names only durable
// chunks). s.mu is held; the slices returned are not to be changed.
func (s *Store) partStateLocked(a proto.Attachment, withHave bool) ([]proto.Hash, []bool, error) {
	if p := s.parts[a.SHA256]; p != nil {
		if p.a.Size != a.Size || p.a.ChunkRoot != a.ChunkRoot {
			return nil, nil, fmt.Errorf("%w: the part of %s is of another size or chunk root", ErrMismatch, a.SHA256)
		}
		if p.chunks == nil {
			return nil, nil, fmt.Errorf("%w: the chunk list of %s", ErrNotYet, a.SHA256)
		}
		return p.chunks, p.have, nil
	}
	base := s.partPath(a.SHA256)
	b, err := os.ReadFile(base + ".chunks")
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(base); err == nil {
			return nil, nil, fmt.Errorf("%w: the chunk list of %s", ErrNotYet, a.SHA256)
		}
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, a.SHA256)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("blob store: %w", err)
	}
	size, root, list, err := decodeChunks(b)
	if err != nil {
		return nil, nil, err
	}
	if size != a.Size || root != a.ChunkRoot {
		return nil, nil, fmt.Errorf("%w: the part of %s is of another size or chunk root", ErrMismatch, a.SHA256)
	}
	if !withHave {
		return list, nil, nil
	}
	have := make([]bool, len(list))
	if bm, err := os.ReadFile(base + ".have"); err == nil && len(bm) == len(list) {
		for i, c := range bm {
			have[i] = c == 1
		}
	}
	return list, have, nil
}
