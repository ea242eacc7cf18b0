package proto

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Attachment limits (PROTOCOL.md §6.8).
const (
	// MaxAttachments bounds the attachments one envelope lists.
	MaxAttachments = 16
	// MaxAttachmentName bounds an attachment's name, in bytes.
	MaxAttachmentName = 255
	// MaxMediaType bounds an attachment's media type, in bytes.
	MaxMediaType = 127
	// MaxAttachmentSize is the largest size the wire allows for one
	// attachment: its chunk hash list (4096 hashes) then fits one frame.
	// Nodes set their own, lower, maximum (meshd: attachment_max, 64 MiB).
	MaxAttachmentSize = MaxAttachmentChunks * ChunkSize
	// ChunkSize is the fixed size of every chunk of a blob but the last.
	ChunkSize = 256 << 10
	// MaxAttachmentChunks bounds the chunks of one attachment.
	MaxAttachmentChunks = 4096
)

// Hash is a SHA-256 digest. On the wire it is a 32-byte byte string.
type Hash [sha256.Size]byte

// ErrAttachment is wrapped when an attachment entry breaks its rules.
var ErrAttachment = errors.New("bad attachment")

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zero.
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText implements encoding.TextMarshaler (JSON output).
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHash parses a hash written as 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%w: hash %q is not 64 hex digits", ErrAttachment, s)
	}
	copy(h[:], b)
	return h, nil
}

// UnmarshalBinary sets h from exactly 32 bytes, so the CBOR decoder
// rejects a byte string of another length as malformed.
func (h *Hash) UnmarshalBinary(b []byte) error {
	if len(b) != len(h) {
		return fmt.Errorf("%w: hash of %d bytes, want %d", ErrAttachment, len(b), len(h))
	}
	copy(h[:], b)
	return nil
}

// Attachment names a file that travels beside an envelope: the envelope
// lists it, its sender signs the list, and the content moves in chunks
// (PROTOCOL.md §6.8, §13.5).
// Wire: {0: name, 1: size, 2: media_type, 3: sha256, 4: chunk_root}.
type Attachment struct {
	Name      string `cbor:"0,keyasint"`
	Size      uint64 `cbor:"1,keyasint"`
	MediaType string `cbor:"2,keyasint"`
	SHA256    Hash   `cbor:"3,keyasint"`
	ChunkRoot Hash   `cbor:"4,keyasint"`
}

// Chunks returns how many chunks a blob of the attachment's size has.
func (a *Attachment) Chunks() int { return ChunkCount(a.Size) }

// ChunkCount returns how many ChunkSize chunks hold size bytes (0 for
// an empty blob).
func ChunkCount(size uint64) int {
	return int((size + ChunkSize - 1) / ChunkSize)
}

// ChunkLen returns the length of chunk i of a blob of size bytes.
func ChunkLen(size uint64, i int) int {
	off := uint64(i) * ChunkSize
	if off >= size {
		return 0
	}
	return int(min(size-off, ChunkSize))
}

// ChunkRoot is SHA-256 over the concatenated SHA-256 of each chunk, in
// order. The root of an empty blob is SHA-256 of nothing.
func ChunkRoot(chunkHashes []Hash) Hash {
	h := sha256.New()
	for _, c := range chunkHashes {
		h.Write(c[:])
	}
	var out Hash
	h.Sum(out[:0])
	return out
}

// Digest reads r to its end and returns what an [Attachment] lists of it:
// its size, SHA-256, chunk root, and each chunk's hash.
func Digest(r io.Reader) (size uint64, sum, root Hash, chunks []Hash, err error) {
	whole := sha256.New()
	buf := make([]byte, ChunkSize)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			whole.Write(buf[:n])
			chunks = append(chunks, sha256.Sum256(buf[:n]))
			size += uint64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return 0, sum, root, nil, rerr
		}
	}
	whole.Sum(sum[:0])
	return size, sum, ChunkRoot(chunks), chunks, nil
}

func (a *Attachment) validate() error {
	if err := CheckAttachmentName(a.Name); err != nil {
		return err
	}
	if err := CheckMediaType(a.MediaType); err != nil {
		return err
	}
	if a.Size > MaxAttachmentSize {
		return fmt.Errorf("%w: %w: %q is %d bytes, the wire allows %d", ErrInvalid, ErrAttachment, a.Name, a.Size, MaxAttachmentSize)
	}
	return nil
}

// CheckAttachmentName checks an attachment's name: 1..MaxAttachmentName
// bytes of UTF-8, not "." or "..", without "/" or "\", control characters
// (line breaks included), U+2028, U+2029 or bidi controls.
func CheckAttachmentName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %w: name %q %s", ErrInvalid, ErrAttachment, name, why)
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > MaxAttachmentName:
		return bad(fmt.Sprintf("is %d bytes, at most %d", len(name), MaxAttachmentName))
	case !utf8.ValidString(name):
		return bad("is not UTF-8")
	case name == "." || name == "..":
		return bad("is a path element")
	case strings.ContainsAny(name, `/\`):
		return bad("holds a path separator")
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			return bad(fmt.Sprintf("holds the control character %U", r))
		}
	}
	return nil
}

// CheckMediaType checks a media type: "type/subtype", 1..MaxMediaType
// bytes of the restricted-name characters of RFC 6838 §4.2, without
// parameters.
func CheckMediaType(mt string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %w: media type %q %s", ErrInvalid, ErrAttachment, mt, why)
	}
	if len(mt) > MaxMediaType {
		return bad(fmt.Sprintf("is %d bytes, at most %d", len(mt), MaxMediaType))
	}
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || !restrictedName(typ) || !restrictedName(sub) {
		return bad("is not type/subtype")
	}
	return nil
}

// restrictedName is RFC 6838's restricted-name: a letter or digit, then
// up to 126 of letters, digits and !#$&-^_.+
func restrictedName(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return false
		}
		if !alnum && !strings.ContainsRune("!#$&-^_.+", rune(c)) {
			return false
		}
	}
	return true
}

// checkAttachments checks an envelope's attachment list: at most
// MaxAttachments valid entries with distinct names.
func checkAttachments(as []Attachment) error {
	if len(as) > MaxAttachments {
		return fmt.Errorf("%w: %w: %d attachments, at most %d", ErrInvalid, ErrAttachment, len(as), MaxAttachments)
	}
	for i := range as {
		if err := as[i].validate(); err != nil {
			return err
		}
		for j := range i {
			if as[j].Name == as[i].Name {
				return fmt.Errorf("%w: %w: two attachments named %q", ErrInvalid, ErrAttachment, as[i].Name)
			}
		}
	}
	return nil
}

// Attachments returns the attachments the envelope lists (in a Message,
// Request or Response), or nil.
func (e *Envelope) Attachments() []Attachment {
	switch {
	case e.Message != nil:
		return e.Message.Attachments
	case e.Request != nil:
		return e.Request.Attachments
	case e.Response != nil:
		return e.Response.Attachments
	}
	return nil
}
