package proto

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Signing domains. The signing input of every signature in meshd is the
// domain string (which ends in a NUL byte) followed by the exact signed
// bytes, so a signature made for one purpose can never be replayed as
// another. ONLY APPEND new domains; never change one.
const (
	DomainEnvelope    = "meshd/envelope/v1\x00"
	DomainRoster      = "meshd/roster/v1\x00"
	DomainPolicy      = "meshd/policy/v1\x00"
	DomainNoiseStatic = "meshd/noise-static/v1\x00"
)

// SignatureSize is the size of an Ed25519 signature.
const SignatureSize = ed25519.SignatureSize

// Signature is an Ed25519 signature, a 64-byte byte string on the wire.
type Signature [SignatureSize]byte

// UnmarshalBinary sets s from exactly 64 bytes. The CBOR decoder uses it
// for byte strings, so a signature of any other length is rejected as
// malformed instead of being zero-padded or truncated.
func (s *Signature) UnmarshalBinary(b []byte) error {
	if len(b) != len(s) {
		return fmt.Errorf("signature of %d bytes, want %d", len(b), len(s))
	}
	copy(s[:], b)
	return nil
}

// Errors a caller may need to tell apart.
var (
	// ErrBadSignature: the signature does not verify over the signed bytes.
	ErrBadSignature = errors.New("bad signature")
	// ErrTooLarge: an input exceeds a size limit before it was decoded.
	ErrTooLarge = errors.New("too large")
)

// SigningInput returns domain || signed, the bytes an Ed25519 signature covers.
func SigningInput(domain string, signed []byte) []byte {
	in := make([]byte, 0, len(domain)+len(signed))
	in = append(in, domain...)
	return append(in, signed...)
}

// Sign signs domain || signed with key.
func Sign(key ed25519.PrivateKey, domain string, signed []byte) Signature {
	var s Signature
	copy(s[:], ed25519.Sign(key, SigningInput(domain, signed)))
	return s
}

// Verify checks sig over domain || signed for pub.
func Verify(pub PubKey, domain string, signed []byte, sig Signature) error {
	// Ed25519 takes the message in one piece, so the signing input is
	// assembled in a pooled buffer rather than a fresh copy per envelope.
	bp := inputPool.Get().(*[]byte)
	in := append(append((*bp)[:0], domain...), signed...)
	ok := false
	if k := expandedKey(pub); k != nil {
		ok = voi.VerifyExpandedWithOptions(k, in, sig[:], stdlibRules)
	}
	if cap(in) <= maxPooledBuf {
		*bp = in
		inputPool.Put(bp)
	}
	if !ok {
		return ErrBadSignature
	}
	return nil
}

// stdlibRules are the acceptance rules of Go's crypto/ed25519 (RFC 8032
// with the cofactorless equation, S < L, R compared by its encoding, A
// decoded as crypto/ed25519 decodes it), so every meshd node accepts
// exactly the signatures crypto/ed25519 would. curve25519-voi checks a
// signature in about half the time of crypto/ed25519 on amd64, and the
// signature check is the receive path's largest single cost.
// TestVerifyMatchesStdlib and FuzzVerifyMatchesStdlib hold the two to the
// same answers, small-order and non-canonical points included.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// expanded caches the expanded form of the keys signatures are checked
// against (the point decoded, and a table of its multiples): a node checks
// the signatures of the same few roster members over and over, and an
// expanded key saves about a sixth of each check. An entry is about
// 1.5 KiB; past maxExpanded keys, one entry makes room for the next.
var expanded = struct {
	sync.RWMutex
	m map[PubKey]*voi.ExpandedPublicKey
}{m: map[PubKey]*voi.ExpandedPublicKey{}}

const maxExpanded = 1024

// expandedKey returns pub expanded, or nil if pub is not a point on the
// curve (no signature verifies for it). The expanded key records the same
// facts about pub that VerifyOptionsStdLib decides on, so a check with it
// answers as one with pub would.
func expandedKey(pub PubKey) *voi.ExpandedPublicKey {
	expanded.RLock()
	k, ok := expanded.m[pub]
	expanded.RUnlock()
	if ok {
		return k
	}
	k, err := voi.NewExpandedPublicKey(voi.PublicKey(pub[:]))
	if err != nil {
		return nil
	}
	expanded.Lock()
	defer expanded.Unlock()
	if len(expanded.m) >= maxExpanded {
		for old := range expanded.m {
			delete(expanded.m, old)
			break
		}
	}
	expanded.m[pub] = k
	return k
}

var inputPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// MaxDocSize bounds an encoded signed document (roster or channel policy).
const MaxDocSize = 1 << 20

// MaxDocSigs bounds the signatures on one document. Each costs a 56 µs
// verification, so a peer must not make us check thousands per frame.
const MaxDocSigs = 64

// DocSig is one signature on a [SignedDoc].
type DocSig struct {
	Signer PubKey    `cbor:"0,keyasint"`
	Sig    Signature `cbor:"1,keyasint"`
}

// SignedDoc is a self-signed document that may carry several signatures:
// the roster and channel policies. Body holds the canonical CBOR of the
// document; each signature covers domain || Body. Signatures are sorted by
// signer key and a signer appears at most once.
//
// Wire form: {0: bstr body, 1: [* {0: bstr(32) signer, 1: bstr(64) sig}]}.
type SignedDoc struct {
	Body []byte   `cbor:"0,keyasint"`
	Sigs []DocSig `cbor:"1,keyasint"`
}

// ParseSignedDoc decodes the wire form strictly and canonically. It checks
// structure only; use [SignedDoc.ValidSigners] to check signatures.
func ParseSignedDoc(b []byte) (*SignedDoc, error) {
	if len(b) > MaxDocSize {
		return nil, fmt.Errorf("signed document of %d bytes: %w (limit %d)", len(b), ErrTooLarge, MaxDocSize)
	}
	var d SignedDoc
	if err := UnmarshalCanonical(b, &d); err != nil {
		return nil, fmt.Errorf("signed document: %w", err)
	}
	if len(d.Body) == 0 {
		return nil, fmt.Errorf("signed document: %w: empty body", ErrMalformed)
	}
	if len(d.Sigs) > MaxDocSigs {
		return nil, fmt.Errorf("signed document: %w: %d signatures exceed %d", ErrTooLarge, len(d.Sigs), MaxDocSigs)
	}
	for i := 1; i < len(d.Sigs); i++ {
		if bytes.Compare(d.Sigs[i-1].Signer[:], d.Sigs[i].Signer[:]) >= 0 {
			return nil, fmt.Errorf("signed document: %w: signatures not sorted by signer or duplicated", ErrNonCanonical)
		}
	}
	return &d, nil
}

// Encode returns the canonical wire form.
func (d *SignedDoc) Encode() ([]byte, error) { return Marshal(d) }

// AddSignature signs Body under domain with key, replacing any earlier
// signature by the same key, and keeps signatures sorted.
func (d *SignedDoc) AddSignature(key ed25519.PrivateKey, domain string) {
	pub := PubKeyOf(key)
	sig := Sign(key, domain, d.Body)
	d.Sigs = slices.DeleteFunc(d.Sigs, func(s DocSig) bool { return s.Signer == pub })
	d.Sigs = append(d.Sigs, DocSig{Signer: pub, Sig: sig})
	slices.SortFunc(d.Sigs, func(a, b DocSig) int { return bytes.Compare(a.Signer[:], b.Signer[:]) })
}

// ValidSigners returns the signers whose signatures verify under domain,
// and an error naming the first signature that does not. A document with
// any bad signature is rejected as a whole by callers: a tampered document
// must never be accepted on the strength of its remaining signatures.
func (d *SignedDoc) ValidSigners(domain string) ([]PubKey, error) {
	out := make([]PubKey, 0, len(d.Sigs))
	for _, s := range d.Sigs {
		if err := Verify(s.Signer, domain, d.Body, s.Sig); err != nil {
			return out, fmt.Errorf("signature by %s: %w", s.Signer.Fingerprint(), err)
		}
		out = append(out, s.Signer)
	}
	return out, nil
}
