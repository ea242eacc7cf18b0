// Package blobs is the content-addressed store of attachments in a node's
// home: one copy of each content, named by its SHA-256, however many
// messages list it.
//
// A complete blob is visible only once every byte is verified: a blob
// added from a local file is copied to a temporary file, fsynced and
// renamed into place; a blob fetched from peers is assembled in a part
// file, each chunk checked against its hash as it arrives, the whole
// content against its SHA-256 before the rename. A part survives
// restarts: the chunk hash list and a bitmap of the chunks present (all
// written after the part's data is fsynced) let the fetch resume.
//
// Layout under the store's directory:
//
//	data/<sha256 hex>     complete, verified blobs (read-only)
//	chunks/<sha256 hex>   their chunk hash lists: size, chunk root, hashes
//	part/<sha256 hex>     the content of a blob being fetched
//	part/<sha256 hex>.chunks  its verified chunk hash list
//	part/<sha256 hex>.have    its bitmap of chunks present and verified
package blobs

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
)

// Errors the store returns; each is wrapped with detail.
var (
	// ErrNotFound: the store holds no complete blob of that hash.
	ErrNotFound = errors.New("blob not found")
	// ErrBadChunk: a chunk, or a chunk hash list, does not match its hash.
	ErrBadChunk = errors.New("chunk does not match its hash")
	// ErrCorrupt: the assembled content does not match its SHA-256, or a
	// stored file is damaged.
	ErrCorrupt = errors.New("blob content does not match its hash")
	// ErrTooLarge: the blob is larger than the store's limit.
	ErrTooLarge = errors.New("blob too large")
	// ErrMismatch: the attachment's size or chunk root differs from the
	// blob's, or from a part already under way for the same SHA-256.
	ErrMismatch = errors.New("attachment does not match the blob")
)

// Store is a blob store rooted at one directory. Its methods are safe for
// concurrent use.
type Store struct {
	dir string
	max uint64

	mu    sync.Mutex
	parts map[proto.Hash]*Part
}

// Open opens (creating if needed) the store in dir. max bounds the size
// of any blob added or fetched (0: proto.MaxAttachmentSize). Temporary
// files left by a crash are removed.
func Open(dir string, max uint64) (*Store, error) {
	if max == 0 || max > proto.MaxAttachmentSize {
		max = proto.MaxAttachmentSize
	}
	for _, sub := range []string{"data", "chunks", "part"} {
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), fsutil.TempPrefix) {
				_ = os.Remove(filepath.Join(p, e.Name()))
			}
		}
	}
	return &Store{dir: dir, max: max, parts: map[proto.Hash]*Part{}}, nil
}

// Max is the largest blob the store takes.
func (s *Store) Max() uint64 { return s.max }

func (s *Store) dataPath(h proto.Hash) string   { return filepath.Join(s.dir, "data", h.String()) }
func (s *Store) chunksPath(h proto.Hash) string { return filepath.Join(s.dir, "chunks", h.String()) }
func (s *Store) partPath(h proto.Hash) string   { return filepath.Join(s.dir, "part", h.String()) }

// Path returns the file of the complete blob h, or ErrNotFound.
func (s *Store) Path(h proto.Hash) (string, error) {
	p := s.dataPath(h)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	return p, nil
}

// Has reports whether the complete blob h is in the store.
func (s *Store) Has(h proto.Hash) bool {
	_, err := s.Path(h)
	return err == nil
}

// Add copies r into the store and returns its attachment entry for name
// and media type, with the chunk hashes. An existing copy is kept (one
// copy per hash). A blob over the store's limit is refused with
// ErrTooLarge, and nothing is left behind.
func (s *Store) Add(r io.Reader, name, mediaType string) (proto.Attachment, error) {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "data"), fsutil.TempPrefix+"add-")
	if err != nil {
		return proto.Attachment{}, fmt.Errorf("blob store: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	defer tmp.Close()
	size, sum, chunks, err := copyIn(r, int64(s.max)+1, tmp)
	if err != nil {
		return proto.Attachment{}, fmt.Errorf("blob store: read %s: %w", name, err)
	}
	if size > s.max {
		return proto.Attachment{}, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, name, s.max)
	}
	a := proto.Attachment{Name: name, Size: size, MediaType: mediaType, SHA256: sum, ChunkRoot: proto.ChunkRoot(chunks)}
	if s.Has(sum) {
		return a, nil
	}
	if err := tmp.Sync(); err != nil {
		return a, fmt.Errorf("blob store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return a, fmt.Errorf("blob store: %w", err)
	}
	if err := s.publish(tmp.Name(), a, chunks); err != nil {
		return a, err
	}
	return a, nil
}

// publish writes the chunk list of a verified blob, then renames its
// content into place: a visible blob always has its chunk list.
func (s *Store) publish(tmp string, a proto.Attachment, chunks []proto.Hash) error {
	if err := fsutil.WriteAtomic(s.chunksPath(a.SHA256), encodeChunks(a.Size, a.ChunkRoot, chunks), 0o600); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	_ = os.Chmod(tmp, 0o400)
	if err := os.Rename(tmp, s.dataPath(a.SHA256)); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	if err := fsutil.SyncDir(filepath.Join(s.dir, "data")); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}

// Chunks returns the chunk hashes of the complete blob h, after checking
// that they match the attachment a that names it (size and chunk root).
func (s *Store) Chunks(a proto.Attachment) ([]proto.Hash, error) {
	if !s.Has(a.SHA256) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, a.SHA256)
	}
	b, err := os.ReadFile(s.chunksPath(a.SHA256))
	if err != nil {
		return nil, fmt.Errorf("%w: chunk list of %s: %w", ErrCorrupt, a.SHA256, err)
	}
	size, root, chunks, err := decodeChunks(b)
	if err != nil {
		return nil, fmt.Errorf("chunk list of %s: %w", a.SHA256, err)
	}
	if size != a.Size || root != a.ChunkRoot {
		return nil, fmt.Errorf("%w: %s holds %d bytes under chunk root %s", ErrMismatch, a.Name, size, root)
	}
	return chunks, nil
}

// ReadChunk reads chunk i of the complete blob a into buf (which must
// hold the chunk: proto.ChunkLen bytes) and returns it.
func (s *Store) ReadChunk(a proto.Attachment, i int, buf []byte) ([]byte, error) {
	if i < 0 || i >= a.Chunks() {
		return nil, fmt.Errorf("blob store: chunk %d of %d", i, a.Chunks())
	}
	f, err := os.Open(s.dataPath(a.SHA256))
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, a.SHA256)
	}
	defer f.Close()
	n := proto.ChunkLen(a.Size, i)
	if _, err := f.ReadAt(buf[:n], int64(i)*proto.ChunkSize); err != nil {
		return nil, fmt.Errorf("%w: read chunk %d of %s: %w", ErrCorrupt, i, a.SHA256, err)
	}
	return buf[:n], nil
}

// Remove deletes the blob h, complete or partial. Removing a blob that
// is not there is not an error.
func (s *Store) Remove(h proto.Hash) error {
	s.mu.Lock()
	p := s.parts[h]
	s.mu.Unlock()
	if p != nil {
		// A checkpoint under way would write its bitmap after the part's
		// files are gone: wait for it (p.ck comes before s.mu).
		p.ck.Lock()
		s.mu.Lock()
		if s.parts[h] == p {
			p.discardLocked()
		}
		s.mu.Unlock()
		p.ck.Unlock()
		p.ckWG.Wait()
		<-p.hashDone
	}
	for _, p := range []string{s.dataPath(h), s.chunksPath(h)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blob store: %w", err)
		}
	}
	return nil
}

// List returns the hashes of the complete blobs in the store.
func (s *Store) List() ([]proto.Hash, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "data"))
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	var out []proto.Hash
	for _, e := range ents {
		if h, err := proto.ParseHash(e.Name()); err == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// chunk list file: 8-byte size, 32-byte chunk root, then the hashes.
const chunksHeader = 8 + sha256.Size

func encodeChunks(size uint64, root proto.Hash, chunks []proto.Hash) []byte {
	b := make([]byte, chunksHeader, chunksHeader+len(chunks)*sha256.Size)
	binary.BigEndian.PutUint64(b, size)
	copy(b[8:], root[:])
	for _, c := range chunks {
		b = append(b, c[:]...)
	}
	return b
}

func decodeChunks(b []byte) (uint64, proto.Hash, []proto.Hash, error) {
	var root proto.Hash
	if len(b) < chunksHeader {
		return 0, root, nil, fmt.Errorf("%w: chunk list of %d bytes", ErrCorrupt, len(b))
	}
	size := binary.BigEndian.Uint64(b)
	copy(root[:], b[8:])
	list, err := ParseChunkList(b[chunksHeader:], proto.Attachment{Size: size, ChunkRoot: root})
	if err != nil {
		return 0, root, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return size, root, list, nil
}

// ParseChunkList checks a chunk hash list, as a peer sends it (the
// concatenated 32-byte hashes), against the attachment a: one hash per
// chunk, and their root is a's chunk root. A list that fails is
// ErrBadChunk.
func ParseChunkList(b []byte, a proto.Attachment) ([]proto.Hash, error) {
	n := a.Chunks()
	if len(b) != n*sha256.Size {
		return nil, fmt.Errorf("%w: chunk list of %d bytes for %d chunks", ErrBadChunk, len(b), n)
	}
	list := make([]proto.Hash, n)
	for i := range list {
		copy(list[i][:], b[i*sha256.Size:])
	}
	if proto.ChunkRoot(list) != a.ChunkRoot {
		return nil, fmt.Errorf("%w: chunk list does not match the chunk root", ErrBadChunk)
	}
	return list, nil
}

// EncodeChunkList is the wire form of a chunk hash list.
func EncodeChunkList(chunks []proto.Hash) []byte {
	b := make([]byte, 0, len(chunks)*sha256.Size)
	for _, c := range chunks {
		b = append(b, c[:]...)
	}
	return b
}
