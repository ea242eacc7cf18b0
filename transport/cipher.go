package transport

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"github.com/flynn/noise"
	"golang.org/x/crypto/chacha20poly1305"
)

// linkCipher is one direction of a link's transport encryption: the
// Noise CipherState the handshake returned (ChaCha20-Poly1305, nonce
// 00000000 || n as 64-bit little endian, PROTOCOL.md §12), with its AEAD
// built once and its nonce kept in place. noise.CipherState builds the
// AEAD's nonce on the heap at every call, which was two of a round
// trip's six allocations at each end. Like a CipherState it is owned by
// one goroutine (the writer or the reader) and fails with
// noise.ErrMaxNonce once the nonces are spent.
type linkCipher struct {
	aead  cipher.AEAD
	n     uint64
	nonce [chacha20poly1305.NonceSize]byte
}

// newLinkCipher takes over cs, which must not be used afterwards.
func newLinkCipher(cs *noise.CipherState) *linkCipher {
	k := cs.UnsafeKey()
	aead, err := chacha20poly1305.New(k[:])
	if err != nil {
		// New fails only for a key that is not 32 bytes.
		panic(fmt.Sprintf("transport: chacha20poly1305 refused a 32-byte key: %v", err))
	}
	return &linkCipher{aead: aead, n: cs.Nonce()}
}

func (c *linkCipher) next() []byte {
	binary.LittleEndian.PutUint64(c.nonce[4:], c.n)
	return c.nonce[:]
}

// Encrypt appends the sealed plaintext to out, as
// noise.CipherState.Encrypt does.
func (c *linkCipher) Encrypt(out, ad, plaintext []byte) ([]byte, error) {
	if c.n > noise.MaxNonce {
		return nil, noise.ErrMaxNonce
	}
	out = c.aead.Seal(out, c.next(), plaintext, ad)
	c.n++
	return out, nil
}

// Decrypt appends the opened ciphertext to out, as
// noise.CipherState.Decrypt does; a record that fails authentication
// does not use up its nonce.
func (c *linkCipher) Decrypt(out, ad, ciphertext []byte) ([]byte, error) {
	if c.n > noise.MaxNonce {
		return nil, noise.ErrMaxNonce
	}
	out, err := c.aead.Open(out, c.next(), ciphertext, ad)
	if err != nil {
		return nil, err
	}
	c.n++
	return out, nil
}

// SetNonce sets the next nonce, for tests of nonce exhaustion.
func (c *linkCipher) SetNonce(n uint64) { c.n = n }
