package channel

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Fixed test identities: ed25519.NewKeyFromSeed of 32 copies of one byte
// (the same as in package roster's tests). In the test roster alice and
// carol are admins, frank an operator, bob a member and dave an observer;
// eve is never a member.
var (
	alice = seedKey(1)
	bob   = seedKey(2)
	carol = seedKey(3)
	dave  = seedKey(4)
	eve   = seedKey(5)
	frank = seedKey(6)
)

// t0 is the fixed timestamp of the golden vectors: 2026-01-01T00:00:00Z.
const t0 = int64(1767225600000)

// Fixed UUIDv7 channel ids whose time is t0; idGeneral < idDeploys.
var (
	idGeneral = uuid.MustParse("019b76da-a800-7000-8000-000000000001")
	idDeploys = uuid.MustParse("019b76da-a800-7000-8000-000000000002")
)

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) proto.PubKey { return proto.PubKeyOf(k) }

// testRoster returns the roster of org "acme" described above, signed by alice.
func testRoster(t testing.TB) *roster.Roster {
	t.Helper()
	r := &roster.Roster{Org: "acme", Version: 1, Timestamp: t0}
	for _, m := range []roster.Member{
		{Key: pub(alice), Role: roster.RoleAdmin, Name: "alice"},
		{Key: pub(bob), Role: roster.RoleMember, Name: "bob"},
		{Key: pub(carol), Role: roster.RoleAdmin, Name: "carol"},
		{Key: pub(dave), Role: roster.RoleObserver, Name: "dave"},
		{Key: pub(frank), Role: roster.RoleOperator, Name: "frank"},
	} {
		if err := r.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Sign(alice); err != nil {
		t.Fatal(err)
	}
	return r
}

// testPolicy returns an unsigned policy of channel id named name with the
// default lists, version 1, timestamp t0, alice as channel admin.
func testPolicy(id uuid.UUID, name string) *Policy {
	return &Policy{
		ID:        id,
		Name:      name,
		ReadACL:   []Principal{RolePrincipal(roster.RoleObserver)},
		WriteACL:  []Principal{RolePrincipal(roster.RoleMember)},
		Admins:    []proto.PubKey{pub(alice)},
		Version:   1,
		Timestamp: t0,
		Org:       "acme",
	}
}

func mustSign(t testing.TB, p *Policy, keys ...ed25519.PrivateKey) *Policy {
	t.Helper()
	for _, k := range keys {
		if err := p.Sign(k); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func mustEncode(t testing.TB, p *Policy) []byte {
	t.Helper()
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, b []byte) *Policy {
	t.Helper()
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

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
func carr(items ...[]byte) []byte {
	return cat(head(4, uint64(len(items))), cat(items...))
}
func cbool(v bool) []byte {
	if v {
		return []byte{0xf5}
	}
	return []byte{0xf4}
}

// kv is one map entry of a hand-built map.
type kv struct {
	k uint64
	v []byte
}

// cmap encodes the entries in the order given.
func cmap(kvs ...kv) []byte {
	b := head(5, uint64(len(kvs)))
	for _, e := range kvs {
		b = append(b, cuint(e.k)...)
		b = append(b, e.v...)
	}
	return b
}

func ckey(k ed25519.PrivateKey) []byte { p := pub(k); return cmap(kv{0, cbstr(p[:])}) }
func crole(r roster.Role) []byte       { return cmap(kv{1, cuint(uint64(r))}) }
func cpub(k ed25519.PrivateKey) []byte { p := pub(k); return cbstr(p[:]) }
func cid(id uuid.UUID) []byte          { return cbstr(id[:]) }

// h decodes hex written with spaces, newlines and "#" comments.
func h(s string) []byte {
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		panic(err)
	}
	return b
}

// fullFields are the body entries of the "full" golden vector, built by
// hand so that the test pins the wire format independently of the
// struct tags.
func fullFields() []kv {
	return []kv{
		{0, cid(idDeploys)},
		{1, ctstr("deploys")},
		// readers: key principals first (bob's key sorts before dave's),
		// then roles ascending.
		{2, carr(ckey(bob), ckey(dave), crole(roster.RoleOperator))},
		{3, carr(ckey(bob), crole(roster.RoleOperator))},
		{4, carr(cpub(alice), cpub(carol))},
		{5, cbool(false)},
		{6, cuint(24)},
		{7, cuint(500)},
		{8, cuint(3)},
		{9, cuint(uint64(t0 + 120_000))},
		{10, ctstr("acme")},
	}
}

// withField returns fields with the value of key k replaced by v.
func withField(fields []kv, k uint64, v []byte) []kv {
	out := make([]kv, len(fields))
	copy(out, fields)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
		}
	}
	return out
}

// signDoc wraps body in a signed document, signed by each key in turn.
func signDoc(t testing.TB, body []byte, keys ...ed25519.PrivateKey) []byte {
	t.Helper()
	d := &proto.SignedDoc{Body: body}
	for _, k := range keys {
		d.AddSignature(k, proto.DomainPolicy)
	}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
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
