package proto

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyPrefix is the scheme prefix of the text form of a [PubKey].
const KeyPrefix = "ed25519:"

// PubKey is an Ed25519 public key: the identity of a node and the only
// thing anything is routed by. On the wire it is a 32-byte CBOR byte string.
type PubKey [ed25519.PublicKeySize]byte

// NodeID is SHA-256 of a [PubKey]. Its hex prefix is the fingerprint.
type NodeID [sha256.Size]byte

// ErrBadKey reports a public key text form that does not parse.
var ErrBadKey = errors.New("invalid public key")

// PubKeyOf returns the [PubKey] of an Ed25519 private or public key.
func PubKeyOf(k ed25519.PrivateKey) PubKey {
	var p PubKey
	copy(p[:], k.Public().(ed25519.PublicKey))
	return p
}

// ParsePubKey parses the text form "ed25519:<base64url, no padding>".
// Standard base64 and padding are refused so that one key has one text form.
func ParsePubKey(s string) (PubKey, error) {
	var p PubKey
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok {
		return p, fmt.Errorf("%w: %q lacks the %q prefix", ErrBadKey, s, KeyPrefix)
	}
	// The decoder skips '\r' and '\n'; the length check refuses them so
	// that no second text form of a key parses.
	if n := base64.RawURLEncoding.EncodedLen(len(p)); len(rest) != n {
		return p, fmt.Errorf("%w: %q: %d characters after the prefix, want %d", ErrBadKey, s, len(rest), n)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil {
		return p, fmt.Errorf("%w: %q: %v", ErrBadKey, s, err)
	}
	if len(b) != len(p) {
		return p, fmt.Errorf("%w: %q: %d bytes, want %d", ErrBadKey, s, len(b), len(p))
	}
	copy(p[:], b)
	return p, nil
}

// String returns the text form "ed25519:<base64url>".
func (k PubKey) String() string {
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(k[:])
}

// Equal compares two keys in constant time.
func (k PubKey) Equal(o PubKey) bool {
	return subtle.ConstantTimeCompare(k[:], o[:]) == 1
}

// IsZero reports whether k is the all-zero key (unset).
func (k PubKey) IsZero() bool { return k == PubKey{} }

// Ed25519 returns k as a stdlib public key.
func (k PubKey) Ed25519() ed25519.PublicKey { return ed25519.PublicKey(k[:]) }

// NodeID returns SHA-256(k).
func (k PubKey) NodeID() NodeID { return sha256.Sum256(k[:]) }

// Fingerprint returns the short human form: the first 16 hex digits of the
// NodeID. It is for display only; never route or authorise by it.
func (k PubKey) Fingerprint() string { return k.NodeID().Short() }

// MarshalText implements encoding.TextMarshaler (used by JSON output).
func (k PubKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *PubKey) UnmarshalText(b []byte) error {
	p, err := ParsePubKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// UnmarshalBinary sets k from exactly 32 bytes. The CBOR decoder uses it
// for byte strings, so a key of any other length is rejected as malformed
// instead of being zero-padded or truncated.
func (k *PubKey) UnmarshalBinary(b []byte) error {
	if len(b) != len(k) {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBadKey, len(b), len(k))
	}
	copy(k[:], b)
	return nil
}

// String returns the NodeID in lowercase hex.
func (n NodeID) String() string { return hex.EncodeToString(n[:]) }

// Short returns the first 16 hex digits of the NodeID: the fingerprint.
func (n NodeID) Short() string { return hex.EncodeToString(n[:8]) }

// Less orders NodeIDs bytewise; the connection manager uses it to break ties.
func (n NodeID) Less(o NodeID) bool {
	for i := range n {
		if n[i] != o[i] {
			return n[i] < o[i]
		}
	}
	return false
}

// MarshalText implements encoding.TextMarshaler.
func (n NodeID) MarshalText() ([]byte, error) { return []byte(n.String()), nil }
