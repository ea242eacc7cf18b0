package proto

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/uuid"
)

// This file holds fixtures and a tiny hand-written CBOR assembler. Negative
// tests build their malformed inputs with it, so they never depend on the
// encoder under test producing (or refusing to produce) a given byte form.

// CBOR major types.
const (
	mtUint  = 0
	mtNint  = 1
	mtBytes = 2
	mtText  = 3
	mtArray = 4
	mtMap   = 5
	mtTag   = 6
	mtOther = 7
)

// cHead returns the shortest head of major type mt with argument n.
func cHead(mt byte, n uint64) []byte {
	switch {
	case n < 24:
		return []byte{mt<<5 | byte(n)}
	case n <= math.MaxUint8:
		return cHeadWidth(mt, n, 1)
	case n <= math.MaxUint16:
		return cHeadWidth(mt, n, 2)
	case n <= math.MaxUint32:
		return cHeadWidth(mt, n, 4)
	default:
		return cHeadWidth(mt, n, 8)
	}
}

// cHeadWidth returns a head of major type mt whose argument n is written
// in exactly width bytes (1, 2, 4 or 8), minimal or not.
func cHeadWidth(mt byte, n uint64, width int) []byte {
	var ai byte
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	switch width {
	case 1:
		ai = 24
	case 2:
		ai = 25
	case 4:
		ai = 26
	case 8:
		ai = 27
	default:
		panic("bad width")
	}
	return append([]byte{mt<<5 | ai}, b[8-width:]...)
}

func cUint(n uint64) []byte { return cHead(mtUint, n) }

// cInt encodes a signed integer (major type 0 or 1).
func cInt(n int64) []byte {
	if n < 0 {
		return cHead(mtNint, uint64(-1-n))
	}
	return cHead(mtUint, uint64(n))
}

func cBytes(b []byte) []byte { return append(cHead(mtBytes, uint64(len(b))), b...) }
func cText(s string) []byte  { return append(cHead(mtText, uint64(len(s))), s...) }

// cArr assembles a definite-length array of already encoded items.
func cArr(items ...[]byte) []byte {
	return append(cHead(mtArray, uint64(len(items))), bytes.Join(items, nil)...)
}

// cMap assembles a definite-length map from alternating encoded keys and
// values, in the order given: it does not sort.
func cMap(kvs ...[]byte) []byte {
	if len(kvs)%2 != 0 {
		panic("cMap needs key/value pairs")
	}
	return append(cHead(mtMap, uint64(len(kvs)/2)), bytes.Join(kvs, nil)...)
}

func cCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var (
	cNull  = []byte{0xf6}
	cTrue  = []byte{0xf5}
	cFalse = []byte{0xf4}
	cBreak = []byte{0xff}
)

// cFloat16 / cFloat32 / cFloat64 encode f with exactly that width.
func cFloat16(bits uint16) []byte { return []byte{0xf9, byte(bits >> 8), byte(bits)} }
func cFloat32(f float32) []byte {
	return binary.BigEndian.AppendUint32([]byte{0xfa}, math.Float32bits(f))
}
func cFloat64(f float64) []byte {
	return binary.BigEndian.AppendUint64([]byte{0xfb}, math.Float64bits(f))
}

// kv is one map entry of a hand-assembled map, both halves encoded.
type kv struct{ k, v []byte }

// entries is an ordered list of map entries; its helpers return modified
// copies so a base value can be reused across table rows.
type entries []kv

func (es entries) encode() []byte {
	var flat [][]byte
	for _, e := range es {
		flat = append(flat, e.k, e.v)
	}
	return cMap(flat...)
}

// set replaces the value of integer key k, or inserts the entry before
// the first key that sorts after it bytewise.
func (es entries) set(k uint64, v []byte) entries {
	out := append(entries(nil), es...)
	key := cUint(k)
	for i := range out {
		switch c := bytes.Compare(out[i].k, key); {
		case c == 0:
			out[i].v = v
			return out
		case c > 0:
			return append(out[:i], append(entries{{key, v}}, out[i:]...)...)
		}
	}
	return append(out, kv{key, v})
}

// del removes integer key k.
func (es entries) del(k uint64) entries {
	var out entries
	for _, e := range es {
		if !bytes.Equal(e.k, cUint(k)) {
			out = append(out, e)
		}
	}
	return out
}

// add appends an entry as is (possibly a duplicate or out of order).
func (es entries) add(k, v []byte) entries {
	return append(append(entries(nil), es...), kv{k, v})
}

// swap exchanges entries i and j.
func (es entries) swap(i, j int) entries {
	out := append(entries(nil), es...)
	out[i], out[j] = out[j], out[i]
	return out
}

// Fixed keys and ids shared by the tests and the known-answer vectors.
var (
	keyAlice = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x01}, ed25519.SeedSize))
	keyBob   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x02}, ed25519.SeedSize))
	keyCarol = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x03}, ed25519.SeedSize))
	alice    = PubKeyOf(keyAlice)
	bob      = PubKeyOf(keyBob)
	carol    = PubKeyOf(keyCarol)

	// fixedTS is 2023-11-14T22:13:20Z in Unix milliseconds.
	fixedTS   = int64(1700000000000)
	chanID    = uuid.MustParse("018bcfe5-6800-7000-8000-0000000000c1")
	epochA    = uuid.MustParse("5f0c6b4e-2d1a-4c3b-9e8f-7a6b5c4d3e2f")
	epochB    = uuid.MustParse("9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d")
	parentReq = uuid.MustParse("018bcfe5-6800-7000-8000-0000000000a0")
	reqID     = uuid.MustParse("018bcfe5-6800-7000-8000-0000000000a1")
)

// idN returns the n-th fixed envelope id.
func idN(n byte) uuid.UUID {
	id := uuid.MustParse("018bcfe5-6800-7000-8000-000000000000")
	id[15] = n
	return id
}

// mustJSON converts a JSON literal to canonical CBOR or fails the test.
func mustJSON(t testing.TB, js string) []byte {
	t.Helper()
	b, err := JSONToCBOR([]byte(js))
	if err != nil {
		t.Fatalf("JSONToCBOR(%s): %v", js, err)
	}
	return b
}

// mustSign signs e with key or fails the test.
func mustSign(t testing.TB, key ed25519.PrivateKey, e *Envelope) *SignedEnvelope {
	t.Helper()
	se, err := SignEnvelope(key, e)
	if err != nil {
		t.Fatalf("SignEnvelope: %v", err)
	}
	return se
}

// wrapSigned signs body under DomainEnvelope with key and returns a
// canonical wire wrapper around it, so a test of a malformed body fails
// for the body's sake and not for the signature's or the wrapper's.
func wrapSigned(key ed25519.PrivateKey, body []byte) []byte {
	sig := Sign(key, DomainEnvelope, body)
	return cMap(cUint(0), cBytes(body), cUint(1), cBytes(sig[:]))
}

// sentinels are the errors a negative test checks exactly: each must be
// in the chain if and only if the test expects it.
var sentinels = []error{ErrMalformed, ErrNonCanonical, ErrInvalid, ErrBadSignature, ErrTooLarge, ErrHopLimit}

// checkSentinels reports whether err's chain holds exactly the sentinels
// in want (among [sentinels]), describing any difference.
func checkSentinels(err error, want ...error) error {
	if err == nil {
		return errors.New("got no error")
	}
	for _, s := range sentinels {
		has, expected := errors.Is(err, s), false
		for _, w := range want {
			if w == s {
				expected = true
			}
		}
		if has != expected {
			return fmt.Errorf("errors.Is(err, %q) = %v, want %v (err: %v)", s, has, expected, err)
		}
	}
	return nil
}

// isErr reports whether err's chain holds an error of type T.
func isErr[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}
