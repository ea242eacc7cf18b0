package transport

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flynn/noise"
)

// TestLinkCipherMatchesNoise: linkCipher seals and opens exactly as the
// noise.CipherState it takes over, from the nonce it had reached; a
// forged record neither opens nor uses up a nonce; the last nonce is
// refused with noise.ErrMaxNonce; and sealing and opening allocate
// nothing.
func TestLinkCipherMatchesNoise(t *testing.T) {
	const start = 1000
	ours, ref := newLinkCipher(vectorCipher(start)), vectorCipher(start)
	peerOurs, peerRef := newLinkCipher(vectorCipher(start)), vectorCipher(start)
	for i := range 50 {
		pt := bytes.Repeat([]byte{byte(i)}, i*37)
		a, err := ours.Encrypt(nil, nil, pt)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ref.Encrypt(nil, nil, pt)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("record %d differs from noise's", i)
		}
		if i%7 == 3 {
			bad := append([]byte(nil), a...)
			bad[len(bad)-1] ^= 1
			if _, err := peerOurs.Decrypt(nil, nil, bad); err == nil {
				t.Fatalf("record %d: a forged record opened", i)
			}
		}
		got, err := peerOurs.Decrypt(nil, nil, a)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("record %d: opened %d bytes, %v", i, len(got), err)
		}
		if got, err := peerRef.Decrypt(nil, nil, b); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("record %d: noise opened %d bytes, %v", i, len(got), err)
		}
	}

	last := newLinkCipher(vectorCipher(noise.MaxNonce))
	if _, err := last.Encrypt(nil, nil, nil); err != nil {
		t.Fatalf("the last nonce: %v", err)
	}
	if _, err := last.Encrypt(nil, nil, nil); !errors.Is(err, noise.ErrMaxNonce) {
		t.Fatalf("past the last nonce: %v, want ErrMaxNonce", err)
	}

	buf := make([]byte, 0, 2048)
	pt := make([]byte, 1024)
	seal, open := newLinkCipher(vectorCipher(0)), newLinkCipher(vectorCipher(0))
	if n := testing.AllocsPerRun(100, func() {
		ct, _ := seal.Encrypt(buf[:0], nil, pt)
		if _, err := open.Decrypt(ct[:0], nil, ct); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a seal and an open allocate %v times, want 0", n)
	}
}
