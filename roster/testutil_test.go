package roster

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
)

// Fixed test identities: ed25519.NewKeyFromSeed of 32 copies of one byte.
// Their keys sort as bob < alice < dave < carol; eve is never a member.
var (
	alice = seedKey(1)
	bob   = seedKey(2)
	carol = seedKey(3)
	dave  = seedKey(4)
	eve   = seedKey(5)
	frank = seedKey(6) // bob's key after a rotation
)

// t0 is the fixed timestamp of the golden vectors: 2026-01-01T00:00:00Z.
const t0 = int64(1767225600000)

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) proto.PubKey { return proto.PubKeyOf(k) }

// Minimal CBOR builder for hand-made (and deliberately broken) encodings.

func head(major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return []byte{m | byte(n)}
	case n <= 0xff:
		return []byte{m | 24, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{m | 25}, uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32([]byte{m | 26}, uint32(n))
	}
	return binary.BigEndian.AppendUint64([]byte{m | 27}, n)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func cuint(n uint64) []byte      { return head(0, n) }
func cbstr(b []byte) []byte      { return cat(head(2, uint64(len(b))), b) }
func ctstr(s string) []byte      { return cat(head(3, uint64(len(s))), []byte(s)) }
func carr(n int) []byte          { return head(4, uint64(n)) }
func cmap(n int) []byte          { return head(5, uint64(n)) }
func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// cmember encodes a member map with the given role and optional name.
func cmember(k ed25519.PrivateKey, role Role, name string) []byte {
	p := pub(k)
	if name == "" {
		return cat(cmap(2), cuint(0), cbstr(p[:]), cuint(1), cuint(uint64(role)))
	}
	return cat(cmap(3), cuint(0), cbstr(p[:]), cuint(1), cuint(uint64(role)), cuint(2), ctstr(name))
}

// signDoc wraps body in a signed document, signed by each key in turn.
func signDoc(t testing.TB, body []byte, keys ...ed25519.PrivateKey) []byte {
	t.Helper()
	d := &proto.SignedDoc{Body: body}
	for _, k := range keys {
		d.AddSignature(k, proto.DomainRoster)
	}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEncode(t testing.TB, r *Roster) []byte {
	t.Helper()
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSign(t testing.TB, r *Roster, keys ...ed25519.PrivateKey) *Roster {
	t.Helper()
	for _, k := range keys {
		if err := r.Sign(k); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func readHex(t testing.TB, name string) []byte {
	t.Helper()
	s, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(s)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}
