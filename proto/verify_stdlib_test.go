package proto

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// Verify uses curve25519-voi with crypto/ed25519's rules. These tests hold
// the two to the same answer where Ed25519 implementations are known to
// differ: public keys and R values with a small-order component, points
// of small order, non-canonical point encodings and S ≥ L.

// edgeCase is one signature to check, with what it was built to probe.
type edgeCase struct {
	what string
	pub  [32]byte
	msg  []byte // the signed bytes, after the domain
	sig  [64]byte
}

// stdlibSays is crypto/ed25519's answer for c.
func stdlibSays(c edgeCase) bool {
	return ed25519.Verify(c.pub[:], SigningInput(DomainEnvelope, c.msg), c.sig[:])
}

// oursSays is Verify's answer for c.
func oursSays(c edgeCase) bool {
	return Verify(PubKey(c.pub), DomainEnvelope, c.msg, Signature(c.sig)) == nil
}

// hramScalar is H(R || A || domain || msg) reduced mod L.
func hramScalar(t testing.TB, r, a []byte, msg []byte) *scalar.Scalar {
	h := sha512.New()
	h.Write(r)
	h.Write(a)
	h.Write(SigningInput(DomainEnvelope, msg))
	k, err := scalar.NewFromBytesModOrderWide(h.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func encodePoint(p *curve.EdwardsPoint) [32]byte {
	var c curve.CompressedEdwardsY
	c.SetEdwardsPoint(p)
	return [32]byte(c)
}

// nonCanonical returns the encodings of field elements p+y (y < 19), with
// and without the sign bit: the only values above p that fit in 255 bits.
func nonCanonical() [][32]byte {
	var out [][32]byte
	for y := range 19 {
		var e [32]byte
		// p = 2^255 - 19, so p + y = 2^255 - 19 + y.
		v := 0xed + y // the low byte of p is 0xed
		e[0] = byte(v)
		carry := v >> 8
		for i := 1; i < 31; i++ {
			e[i] = byte(0xff + carry)
			carry = (0xff + carry) >> 8
		}
		e[31] = byte(0x7f + carry)
		if carry != 0 || e[31]&0x80 != 0 {
			continue // past 2^255
		}
		out = append(out, e)
		e[31] |= 0x80
		out = append(out, e)
	}
	return out
}

// edgeCases builds the signatures: for every point T of the eight-torsion
// subgroup, signatures by A+T (valid under the cofactored equation, and
// under crypto/ed25519's cofactorless one only when H(R,A,M)·T is the
// identity), signatures with R+T, small-order keys with small-order R,
// non-canonical encodings of A and R, and S pushed over L.
func edgeCases(t testing.TB, msgs int) []edgeCase {
	rng := rand.New(rand.NewPCG(1, 2))
	var cases []edgeCase
	randomScalar := func() *scalar.Scalar {
		var b [64]byte
		for i := 0; i < 64; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		s, err := scalar.NewFromBytesModOrderWide(b[:])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	message := func() []byte {
		m := make([]byte, 8+rng.IntN(64))
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		return m
	}
	sign := func(what string, pubPt, rPt *curve.EdwardsPoint, r, a *scalar.Scalar, msg []byte) edgeCase {
		pub, rEnc := encodePoint(pubPt), encodePoint(rPt)
		k := hramScalar(t, rEnc[:], pub[:], msg)
		var s scalar.Scalar
		s.Mul(k, a)
		s.Add(&s, r)
		c := edgeCase{what: what, pub: pub, msg: msg}
		copy(c.sig[:32], rEnc[:])
		if err := s.ToBytes(c.sig[32:]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for ti, tp := range curve.EIGHT_TORSION {
		for range msgs {
			a, r := randomScalar(), randomScalar()
			var aB, rB, aT, rT curve.EdwardsPoint
			aB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
			rB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
			aT.Add(&aB, tp)
			rT.Add(&rB, tp)
			msg := message()
			cases = append(cases,
				sign("A+T"+string(rune('0'+ti)), &aT, &rB, r, a, msg),
				sign("R+T"+string(rune('0'+ti)), &aB, &rT, r, a, msg),
				sign("A+T, R+T", &aT, &rT, r, a, msg))
			// S + L: the same signature with a non-reduced S.
			c := sign("S+L", &aB, &rB, r, a, msg)
			addL(c.sig[32:])
			cases = append(cases, c)
		}
		// A small-order key with a small-order R and S = 0: the equation
		// [0]B = R + k·A holds whenever k·A = -R.
		for _, rp := range curve.EIGHT_TORSION {
			for range 4 {
				c := edgeCase{what: "small A, small R, S=0", pub: encodePoint(tp), msg: message()}
				rEnc := encodePoint(rp)
				copy(c.sig[:32], rEnc[:])
				cases = append(cases, c)
			}
		}
	}
	// Non-canonical encodings as A, as R, or both, with S = 0 and S = 1.
	for _, e := range nonCanonical() {
		for _, f := range nonCanonical() {
			for _, s := range []byte{0, 1} {
				c := edgeCase{what: "non-canonical A and R", pub: e, msg: message()}
				copy(c.sig[:32], f[:])
				c.sig[32] = s
				cases = append(cases, c)
			}
		}
		a, r := randomScalar(), randomScalar()
		var aB, rB curve.EdwardsPoint
		aB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
		rB.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
		c := sign("valid, then R replaced by a non-canonical encoding", &aB, &rB, r, a, message())
		copy(c.sig[:32], e[:])
		cases = append(cases, c)
	}
	return cases
}

// addL adds the group order L to the little-endian 32-byte scalar s.
func addL(s []byte) {
	l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	carry := 0
	for i := range 32 {
		v := int(s[i]) + int(l[i]) + carry
		s[i] = byte(v)
		carry = v >> 8
	}
}

func TestVerifyMatchesStdlib(t *testing.T) {
	cases := edgeCases(t, 24)
	accepted := map[string]int{}
	for _, c := range cases {
		want, got := stdlibSays(c), oursSays(c)
		if want != got {
			t.Errorf("%s: crypto/ed25519 says %v, Verify says %v\npub %x\nsig %x\nmsg %x", c.what, want, got, c.pub, c.sig, c.msg)
		}
		if want {
			accepted[c.what]++
		}
	}
	// The cases must probe both answers, or the comparison proves little:
	// A+T with T of order 8 verifies under the cofactorless equation only
	// for about one message in eight, and S+L never does.
	if accepted["A+T0"] != 24 {
		t.Errorf("A+T with T the identity: %d of 24 accepted, want all", accepted["A+T0"])
	}
	var someTorsion int
	for i := 1; i < 8; i++ {
		someTorsion += accepted["A+T"+string(rune('0'+i))]
	}
	if someTorsion == 0 || someTorsion == 7*24 {
		t.Errorf("A+T with T of small order: %d of %d accepted; want some, not all", someTorsion, 7*24)
	}
	if accepted["S+L"] != 0 {
		t.Errorf("S+L accepted %d times", accepted["S+L"])
	}
	t.Logf("%d cases, accepted by both: %v", len(cases), accepted)
}

// FuzzVerifyMatchesStdlib mutates edge-case signatures (key, R, S and
// message bytes) and checks that Verify and crypto/ed25519 agree.
func FuzzVerifyMatchesStdlib(f *testing.F) {
	for i, c := range edgeCases(f, 1) {
		if i%16 == 0 { // a sample of each kind; the fuzzer mutates them
			f.Add(c.pub[:], c.sig[:], c.msg)
		}
	}
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	msg := []byte("a valid signature")
	sig := Sign(priv, DomainEnvelope, msg)
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), sig[:], msg)
	f.Fuzz(func(t *testing.T, pub, sig, msg []byte) {
		if len(pub) != 32 || len(sig) != 64 {
			return
		}
		c := edgeCase{pub: [32]byte(pub), sig: [64]byte(sig), msg: msg}
		if want, got := stdlibSays(c), oursSays(c); want != got {
			t.Fatalf("crypto/ed25519 says %v, Verify says %v\npub %x\nsig %x\nmsg %x", want, got, c.pub, c.sig, c.msg)
		}
	})
}
