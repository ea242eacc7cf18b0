package proto

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSigningInput(t *testing.T) {
	signed := []byte{0xa1, 0x00, 0x01}
	got := SigningInput(DomainEnvelope, signed)
	want := append([]byte("meshd/envelope/v1\x00"), signed...)
	if !bytes.Equal(got, want) {
		t.Fatalf("SigningInput = %q, want %q", got, want)
	}
	// Every domain ends in its only NUL byte, so no domain is a prefix of
	// another and no signed bytes can make one signing input look like
	// another domain's.
	domains := []string{DomainEnvelope, DomainRoster, DomainPolicy, DomainNoiseStatic}
	for i, d := range domains {
		if !strings.HasSuffix(d, "\x00") || strings.Count(d, "\x00") != 1 || !strings.HasPrefix(d, "meshd/") {
			t.Errorf("domain %q is not meshd/...\\x00 with one NUL", d)
		}
		for j, o := range domains {
			if i != j && strings.HasPrefix(o, d) {
				t.Errorf("domain %q is a prefix of %q", d, o)
			}
		}
	}
	if DomainRoster != "meshd/roster/v1\x00" || DomainPolicy != "meshd/policy/v1\x00" || DomainNoiseStatic != "meshd/noise-static/v1\x00" {
		t.Error("a signing domain changed")
	}
}

func TestSignVerify(t *testing.T) {
	msg := []byte("signed bytes")
	sig := Sign(keyAlice, DomainEnvelope, msg)
	if err := Verify(alice, DomainEnvelope, msg, sig); err != nil {
		t.Fatal(err)
	}
	// Domain separation: the same key and bytes under any other domain fail.
	for _, d := range []string{DomainRoster, DomainPolicy, DomainNoiseStatic} {
		if err := Verify(alice, d, msg, sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("envelope signature verified under %q: %v", d, err)
		}
	}
	// The signing input is a plain concatenation: a domain without its
	// NUL and a message that starts with one give the same input. The
	// separation rests on every domain ending in its only NUL byte (see
	// TestSigningInput), not on any framing.
	shifted := Sign(keyAlice, strings.TrimSuffix(DomainEnvelope, "\x00"), append([]byte{0}, msg...))
	if shifted != sig {
		t.Fatal("signing input is not a plain concatenation")
	}
	if err := Verify(bob, DomainEnvelope, msg, sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: %v", err)
	}
}

func testDoc(t *testing.T) *SignedDoc {
	t.Helper()
	body, err := Marshal(map[int]any{0: "acme", 1: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &SignedDoc{Body: body}
}

func TestSignedDocAddSignature(t *testing.T) {
	d := testDoc(t)
	for _, k := range [][]byte{keyCarol, keyAlice, keyBob} {
		d.AddSignature(k, DomainRoster)
	}
	// bob < alice < carol bytewise.
	want := []PubKey{bob, alice, carol}
	for i, s := range d.Sigs {
		if s.Signer != want[i] {
			t.Fatalf("signature %d by %s, want %s (not sorted)", i, s.Signer.Fingerprint(), want[i].Fingerprint())
		}
	}
	signers, err := d.ValidSigners(DomainRoster)
	if err != nil || !reflect.DeepEqual(signers, want) {
		t.Fatalf("ValidSigners = %v, %v", signers, err)
	}

	// Round trip through the wire form.
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSignedDoc(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip differs")
	}

	// Replacing: a new body, re-signed by alice only. Alice's signature is
	// replaced (still three, still sorted); bob's is now stale.
	d.Body = append(bytes.Clone(d.Body[:len(d.Body)-1]), 0x02)
	old := d.Sigs[1].Sig
	d.AddSignature(keyAlice, DomainRoster)
	if len(d.Sigs) != 3 || d.Sigs[1].Signer != alice || d.Sigs[1].Sig == old {
		t.Fatalf("AddSignature did not replace alice's signature: %+v", d.Sigs)
	}
	signers, err = d.ValidSigners(DomainRoster)
	if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), bob.Fingerprint()) {
		t.Fatalf("ValidSigners with a stale signature: %v", err)
	}
	if len(signers) != 0 {
		t.Fatalf("ValidSigners stopped at bob but returned %v", signers)
	}
	d.AddSignature(keyBob, DomainRoster)
	d.AddSignature(keyCarol, DomainRoster)
	if _, err := d.ValidSigners(DomainRoster); err != nil {
		t.Fatal(err)
	}
}

func TestSignedDocValidSignersReportsBadSignature(t *testing.T) {
	d := testDoc(t)
	d.AddSignature(keyAlice, DomainRoster)
	d.AddSignature(keyCarol, DomainRoster)
	d.AddSignature(keyBob, DomainRoster)
	d.Sigs[2].Sig[0] ^= 1 // carol's
	signers, err := d.ValidSigners(DomainRoster)
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v, want ErrBadSignature", err)
	}
	if !strings.Contains(err.Error(), carol.Fingerprint()) {
		t.Fatalf("error %q does not name carol", err)
	}
	if !reflect.DeepEqual(signers, []PubKey{bob, alice}) {
		t.Fatalf("signers = %v", signers)
	}
}

func TestSignedDocDomainSeparation(t *testing.T) {
	d := testDoc(t)
	// An envelope signature over the very same bytes is not a roster
	// signature, and a roster signature is not a policy signature.
	d.Sigs = []DocSig{{Signer: alice, Sig: Sign(keyAlice, DomainEnvelope, d.Body)}}
	if _, err := d.ValidSigners(DomainRoster); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("envelope signature accepted as roster signature: %v", err)
	}
	d.Sigs = nil
	d.AddSignature(keyAlice, DomainRoster)
	if _, err := d.ValidSigners(DomainPolicy); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("roster signature accepted as policy signature: %v", err)
	}
	if _, err := d.ValidSigners(DomainRoster); err != nil {
		t.Fatal(err)
	}
	// And a roster signature over bytes that happen to be a valid
	// envelope body does not make an envelope.
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	e.Message = &Message{Body: "hi"}
	signed, _ := Marshal(&e)
	rs := Sign(keyAlice, DomainRoster, signed)
	se, err := ParseEnvelope(cMap(cUint(0), cBytes(signed), cUint(1), cBytes(rs[:])))
	if err != nil {
		t.Fatal(err)
	}
	if err := se.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("roster signature verified as an envelope: %v", err)
	}
}

func TestParseSignedDocRejects(t *testing.T) {
	body := cMap(cUint(0), cText("acme"))
	sa := Sign(keyAlice, DomainRoster, body)
	sb := Sign(keyBob, DomainRoster, body)
	sigA := cMap(cUint(0), cBytes(alice[:]), cUint(1), cBytes(sa[:]))
	sigB := cMap(cUint(0), cBytes(bob[:]), cUint(1), cBytes(sb[:]))
	doc := func(sigs ...[]byte) []byte { return cMap(cUint(0), cBytes(body), cUint(1), cArr(sigs...)) }

	tests := []struct {
		name  string
		in    []byte
		wants []error
		is    func(error) bool
	}{
		{"control: sorted", doc(sigB, sigA), nil, nil},
		{"control: no signatures", doc(), nil, nil},
		{"unsorted signatures", doc(sigA, sigB), []error{ErrNonCanonical}, nil},
		{"duplicate signer", doc(sigA, sigA), []error{ErrNonCanonical}, nil},
		{"empty body", cMap(cUint(0), cBytes(nil), cUint(1), cArr(sigA)), []error{ErrMalformed}, nil},
		{"sigs null", cMap(cUint(0), cBytes(body), cUint(1), cNull), []error{ErrNonCanonical}, nil},
		{"sigs missing", cMap(cUint(0), cBytes(body)), []error{ErrNonCanonical}, nil},
		{"body missing", cMap(cUint(1), cArr(sigA)), []error{ErrNonCanonical}, nil},
		{"wrapper keys unsorted", cMap(cUint(1), cArr(sigA), cUint(0), cBytes(body)), []error{ErrNonCanonical}, nil},
		{"body length non-minimal", cMap(cUint(0), cCat(cHeadWidth(mtBytes, uint64(len(body)), 1), body), cUint(1), cArr(sigA)), []error{ErrNonCanonical}, nil},
		{"unknown key", cMap(cUint(0), cBytes(body), cUint(1), cArr(sigA), cUint(2), cUint(0)), []error{ErrMalformed}, isUnknown},
		{"unknown key in signature", doc(cMap(cUint(0), cBytes(alice[:]), cUint(1), cBytes(sa[:]), cUint(2), cUint(0))), []error{ErrMalformed}, nil},
		{"signer 31 bytes", doc(cMap(cUint(0), cBytes(alice[:31]), cUint(1), cBytes(sa[:]))), []error{ErrMalformed}, isBadKeyLen},
		{"signature 63 bytes", doc(cMap(cUint(0), cBytes(alice[:]), cUint(1), cBytes(sa[:63]))), []error{ErrMalformed}, nil},
		{"indefinite signature array", cMap(cUint(0), cBytes(body), cUint(1), cCat([]byte{0x9f}, sigA, cBreak)), []error{ErrMalformed}, isIndef},
		{"duplicate key", cMap(cUint(0), cBytes(body), cUint(0), cBytes(body), cUint(1), cArr(sigA)), []error{ErrMalformed}, isDup},
		{"trailing byte", cCat(doc(sigA), []byte{0}), []error{ErrMalformed}, isExtra},
		{"tagged", cCat([]byte{0xd8, 0x62}, doc(sigA)), []error{ErrMalformed}, isTag},
		{"too large", make([]byte, MaxDocSize+1), []error{ErrTooLarge}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseSignedDoc(tt.in)
			if tt.wants == nil {
				if err != nil {
					t.Fatalf("control: %v", err)
				}
				enc, err := d.Encode()
				if err != nil || !bytes.Equal(enc, tt.in) {
					t.Fatalf("re-encode differs: %v", err)
				}
				if _, err := d.ValidSigners(DomainRoster); err != nil {
					t.Fatal(err)
				}
				return
			}
			if d != nil {
				t.Fatal("returned a document with an error")
			}
			if err := checkSentinels(err, tt.wants...); err != nil {
				t.Fatal(err)
			}
			if tt.is != nil && !tt.is(err) {
				t.Fatalf("error %v lacks the expected cause", err)
			}
		})
	}
}

// TestVerifyExpandedKeyCache checks signatures by more keys than the cache
// of expanded keys holds: each verifies, a wrong key or message does not,
// and the cache stays within its bound.
func TestVerifyExpandedKeyCache(t *testing.T) {
	msg := []byte("cache")
	var prev PubKey
	for i := range maxExpanded + 50 {
		seed := make([]byte, ed25519.SeedSize)
		binary.BigEndian.PutUint32(seed, uint32(i))
		key := ed25519.NewKeyFromSeed(seed)
		pub := PubKeyOf(key)
		sig := Sign(key, DomainEnvelope, msg)
		if err := Verify(pub, DomainEnvelope, msg, sig); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		// Twice: the second check uses the cached key.
		if err := Verify(pub, DomainEnvelope, msg, sig); err != nil {
			t.Fatalf("key %d, cached: %v", i, err)
		}
		if i > 0 && Verify(prev, DomainEnvelope, msg, sig) == nil {
			t.Fatalf("key %d's signature verified for key %d", i, i-1)
		}
		if Verify(pub, DomainEnvelope, []byte("cachf"), sig) == nil {
			t.Fatalf("key %d: a signature verified for another message", i)
		}
		prev = pub
	}
	expanded.RLock()
	n := len(expanded.m)
	expanded.RUnlock()
	if n > maxExpanded {
		t.Errorf("%d expanded keys cached, bound %d", n, maxExpanded)
	}
}
