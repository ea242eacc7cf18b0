package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/proto"
)

// FuzzReadFrame feeds arbitrary bytes to the record reader and the frame
// assembler, treating each record as a decrypted transport plaintext (the
// AEAD is not what is under test). The first byte picks a small or the
// real frame cap. It checks that nothing panics, no frame or buffer ever
// exceeds the cap, and errors are the documented ones.
func FuzzReadFrame(f *testing.F) {
	rec := func(msgs ...[]byte) []byte {
		var out []byte
		for _, m := range msgs {
			out, _ = appendRecord(out, m)
		}
		return out
	}
	f.Add(append([]byte{0}, rec([]byte{hdrFinal, 'h', 'i'})...))
	f.Add(append([]byte{0}, rec([]byte{hdrChunk, 'a'}, []byte{hdrPing}, []byte{hdrFinal, 'b'}, []byte{hdrFinal})...))
	f.Add(append([]byte{1}, rec(append([]byte{hdrChunk}, make([]byte, 3000)...), []byte{hdrFinal, 1})...))
	f.Add(append([]byte{1}, rec([]byte{hdrPong, 1}, []byte{7})...))
	f.Add(append([]byte{1}, rec(append([]byte{hdrChunk, creditedFrame}, make([]byte, 3000)...), []byte{hdrFinal, 1})...))
	f.Add(append([]byte{0}, rec(append([]byte{hdrChunk, creditedFrame}, make([]byte, 3000)...), []byte{hdrFinal, 1})...))
	f.Add([]byte{0, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte{0, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		limit := proto.MaxFrameSize
		if data[0]&1 == 1 {
			limit = 4096
		}
		r := bytes.NewReader(data[1:])
		buf := make([]byte, maxRecord)
		a := assembler{max: limit}
		for {
			rec, err := readRecord(r, buf)
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("readRecord: unexpected error %v", err)
				}
				return
			}
			if len(rec) > maxRecord || &rec[:1][0] != &buf[0] {
				t.Fatalf("record of %d bytes escaped the fixed buffer", len(rec))
			}
			m, err := a.add(rec)
			if cap(a.buf) > limit {
				t.Fatalf("assembler holds %d bytes of capacity, cap %d", cap(a.buf), limit)
			}
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("add: undocumented error %v", err)
				}
				return
			}
			if m.kind == hdrFinal && len(m.frame) > limit {
				t.Fatalf("frame of %d bytes, cap %d", len(m.frame), limit)
			}
		}
	})
}

// fuzzResponder is a listener-side endpoint shared by fuzz iterations.
var fuzzResponder = sync.OnceValue(func() *endpoint {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	cfg := Config{Identity: ed25519.NewKeyFromSeed(seed), Org: testOrg, HandshakeTimeout: 2 * time.Second}
	cfg.Admit = func(p *proto.HandshakePayload) error { return nil }
	e, err := newEndpoint(cfg)
	if err != nil {
		panic(err)
	}
	return e
})

// FuzzHandshakePayload drives the responder with hostile input. The first
// byte picks the mode:
//
//	0: the rest is a payload, decoded and checked as a peer's (fast path).
//	1: the rest is the raw byte stream an initiator sends (records and all).
//	2: a correct initiator completes messages 1 and 2, then sends the rest
//	   as its encrypted message 3 payload, so the payload checks run on
//	   authenticated but arbitrary bytes.
//
// Nothing may panic, and no handshake may succeed without a valid binding.
func FuzzHandshakePayload(f *testing.F) {
	id := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	static, _ := NewStaticKey()
	good := proto.HandshakePayload{Version: proto.ProtocolVersion, Org: testOrg, RosterVersion: 3, Name: "n", Listen: []string{"tcp://1.2.3.4:5"}}
	good.BindStatic(id, static.Public())
	goodBytes, _ := good.Encode()
	for mode := byte(0); mode < 3; mode++ {
		f.Add(append([]byte{mode}, goodBytes...))
		f.Add([]byte{mode})
		f.Add(append([]byte{mode}, 0xa0))
	}
	f.Add(append([]byte{1, 0, 32}, make([]byte, 32)...))
	f.Add(append(append([]byte{1, 0, 32}, make([]byte, 32)...), 0, 80, 1, 2, 3))
	f.Add([]byte{1, 0xff, 0xff})
	e := fuzzResponder()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mode, rest := data[0]%3, data[1:]
		switch mode {
		case 0:
			if p, err := e.checkPeer(rest, static.Public(), false); err == nil {
				// Only a payload signed by the identity it names over
				// this static key may pass.
				if p.VerifyStatic(static.Public()) != nil || p.Org != testOrg {
					t.Fatal("checkPeer accepted a payload that does not verify")
				}
			}
		case 1, 2:
			c1, c2 := net.Pipe()
			done := make(chan error, 1)
			go func() {
				l, err := e.server(context.Background(), c2)
				if l != nil {
					l.Close()
				}
				done <- err
			}()
			if mode == 1 {
				drained := make(chan struct{})
				go func() { io.Copy(io.Discard, c1); close(drained) }()
				c1.SetDeadline(time.Now().Add(time.Second))
				c1.Write(rest)
				c1.Close()
				<-drained
			} else {
				fuzzInitiator(c1, rest)
				c1.Close()
			}
			if err := <-done; err == nil {
				t.Fatal("handshake succeeded without a valid identity binding")
			} else if !errors.Is(err, ErrHandshake) {
				t.Fatalf("error %v does not wrap ErrHandshake", err)
			}
		}
	})
}

// fuzzInitiator runs messages 1 and 2 correctly and sends payload in
// message 3.
func fuzzInitiator(c net.Conn, payload []byte) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	key, _ := cipherSuite.GenerateKeypair(nil)
	hs, _ := noise.NewHandshakeState(noise.Config{
		CipherSuite: cipherSuite, Pattern: noise.HandshakeXX, Initiator: true,
		Prologue: proto.Prologue(testOrg), StaticKeypair: key,
	})
	m1, _, _, _ := hs.WriteMessage(nil, nil)
	if writeRecord(c, m1) != nil {
		return
	}
	m2, err := readRecord(bufio.NewReader(c), make([]byte, maxRecord))
	if err != nil {
		return
	}
	if _, _, _, err := hs.ReadMessage(nil, m2); err != nil {
		return
	}
	if len(payload) > maxRecord-64 {
		payload = payload[:maxRecord-64]
	}
	m3, _, _, err := hs.WriteMessage(nil, payload)
	if err != nil {
		return
	}
	writeRecord(c, m3)
}
