package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

var errNotMember = errors.New("not in the roster")

// listenRec listens with a recorder attached to the logger.
func listenRec(t *testing.T, network string, cfg Config) (*Listener, *recorder) {
	t.Helper()
	rec := newRecorder()
	cfg.Logger = slog.New(rec)
	return listen(t, network, cfg), rec
}

// expectNoAccept checks that the listener delivers no link.
func expectNoAccept(t *testing.T, ln *Listener) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if l, err := ln.Accept(ctx); err == nil {
		l.Close()
		t.Fatal("listener accepted a link it should have refused")
	}
}

func TestAdmitRefused(t *testing.T) {
	t.Run("by-responder", func(t *testing.T) {
		checkLeaks(t)
		a, b := testConfig(t, testOrg), testConfig(t, testOrg)
		var seen *proto.HandshakePayload
		b.Admit = func(p *proto.HandshakePayload) error { seen = p; return errNotMember }
		ln, rec := listenRec(t, "tcp", b)
		// XX lets the responder judge only after message 3, so the dial
		// completes and the link then dies.
		out, err := Dial(context.Background(), ln.Addr(), a, nil)
		if err == nil {
			out.Start(nil)
			err = waitDone(t, out, 3*time.Second)
		}
		if err == nil {
			t.Fatal("refused link stayed up")
		}
		got := rec.next(t)
		if !errors.Is(got, ErrNotAdmitted) || !errors.Is(got, errNotMember) || !errors.Is(got, ErrHandshake) {
			t.Fatalf("listener logged %v", got)
		}
		if seen == nil || !seen.Identity.Equal(keyOf(a)) {
			t.Error("Admit did not see the initiator's payload")
		}
		expectNoAccept(t, ln)
		if st := ln.Stats(); st.Failed != 1 || st.Accepted != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("by-initiator", func(t *testing.T) {
		checkLeaks(t)
		a, b := testConfig(t, testOrg), testConfig(t, testOrg)
		a.Admit = func(p *proto.HandshakePayload) error { return errNotMember }
		ln, rec := listenRec(t, "tcp", b)
		p := newProxy(t, ln.Addr(), -1, -1)
		_, err := Dial(context.Background(), p.addr(), a, nil)
		if !errors.Is(err, ErrNotAdmitted) || !errors.Is(err, errNotMember) || !errors.Is(err, ErrHandshake) {
			t.Fatalf("Dial = %v", err)
		}
		if got := rec.next(t); !errors.Is(got, io.EOF) && !errors.Is(got, io.ErrUnexpectedEOF) {
			t.Errorf("listener logged %v, want EOF before message 3", got)
		}
		if n := p.upBytes.Load(); n != 2+msg1Len {
			t.Errorf("initiator sent %d bytes, want only message 1 (%d)", n, 2+msg1Len)
		}
	})
}

func TestUnexpectedPeer(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	ln, rec := listenRec(t, "tcp", b)
	p := newProxy(t, ln.Addr(), -1, -1)
	wrong := keyOf(testConfig(t, testOrg))
	_, err := Dial(context.Background(), p.addr(), a, &wrong)
	if !errors.Is(err, ErrUnexpectedPeer) || !errors.Is(err, ErrHandshake) {
		t.Fatalf("Dial = %v, want ErrUnexpectedPeer", err)
	}
	rec.next(t)
	if n := p.upBytes.Load(); n != 2+msg1Len {
		t.Errorf("initiator sent %d bytes, want only message 1 (%d)", n, 2+msg1Len)
	}
	expectNoAccept(t, ln)

	// The right key passes.
	right := keyOf(b)
	out, in := pair(t, ln, a, &right)
	out.Close()
	in.Close()
}

func TestWrongOrg(t *testing.T) {
	t.Run("prologue", func(t *testing.T) {
		checkLeaks(t)
		a, b := testConfig(t, "other-org"), testConfig(t, testOrg)
		ln, rec := listenRec(t, "unix", b)
		_, err := Dial(context.Background(), ln.Addr(), a, nil)
		if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrProtocol) {
			t.Fatalf("Dial = %v, want a message 2 authentication failure", err)
		}
		rec.next(t)
		expectNoAccept(t, ln)
	})
	t.Run("payload-to-responder", func(t *testing.T) {
		checkLeaks(t)
		b := testConfig(t, testOrg)
		ln, rec := listenRec(t, "tcp", b)
		rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg, payloadOrg: "other-org"})
		if got := rec.next(t); !errors.Is(got, ErrWrongOrg) {
			t.Fatalf("listener logged %v, want ErrWrongOrg", got)
		}
		expectNoAccept(t, ln)
	})
	t.Run("payload-to-initiator", func(t *testing.T) {
		checkLeaks(t)
		addr := rawServer(t, func(c net.Conn) {
			rawRespond(t, c, rawOpts{identity: newIdentity(t), org: testOrg, payloadOrg: "other-org"})
		})
		_, err := Dial(context.Background(), addr, testConfig(t, testOrg), nil)
		if !errors.Is(err, ErrWrongOrg) {
			t.Fatalf("Dial = %v, want ErrWrongOrg", err)
		}
	})
}

func TestTamperedHandshake(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir, idx int
	}{
		{"message-1", 0, 0},
		{"message-2", 1, 0},
		{"message-3", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			a, b := testConfig(t, testOrg), testConfig(t, testOrg)
			ln, rec := listenRec(t, "tcp", b)
			p := newProxy(t, ln.Addr(), tc.dir, tc.idx)
			out, err := Dial(context.Background(), p.addr(), a, nil)
			if tc.name == "message-3" {
				// The initiator has finished; the responder refuses and
				// closes, which the link then sees.
				if err != nil {
					t.Fatalf("Dial = %v", err)
				}
				out.Start(nil)
				if err := waitDone(t, out, 3*time.Second); err == nil {
					t.Fatal("link stayed up")
				}
				if got := rec.next(t); !errors.Is(got, ErrProtocol) {
					t.Fatalf("listener logged %v, want ErrProtocol", got)
				}
			} else {
				if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrProtocol) {
					t.Fatalf("Dial = %v, want ErrProtocol", err)
				}
				rec.next(t)
			}
			expectNoAccept(t, ln)
		})
	}
}

func TestIdentityBinding(t *testing.T) {
	t.Run("initiator-lies", func(t *testing.T) {
		checkLeaks(t)
		ln, rec := listenRec(t, "tcp", testConfig(t, testOrg))
		rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg, bindOther: true})
		if got := rec.next(t); !errors.Is(got, ErrIdentityBinding) {
			t.Fatalf("listener logged %v, want ErrIdentityBinding", got)
		}
		expectNoAccept(t, ln)
	})
	t.Run("responder-lies", func(t *testing.T) {
		checkLeaks(t)
		addr := rawServer(t, func(c net.Conn) {
			rawRespond(t, c, rawOpts{identity: newIdentity(t), org: testOrg, bindOther: true})
		})
		_, err := Dial(context.Background(), addr, testConfig(t, testOrg), nil)
		if !errors.Is(err, ErrIdentityBinding) || !errors.Is(err, ErrHandshake) {
			t.Fatalf("Dial = %v, want ErrIdentityBinding", err)
		}
	})
	t.Run("stolen-payload", func(t *testing.T) {
		// A payload copied from a real node (its identity and signature)
		// over the attacker's own static key.
		checkLeaks(t)
		victim := testConfig(t, testOrg)
		vk, _ := NewStaticKey()
		_, sig := vk.binding(victim.Identity)
		ln, rec := listenRec(t, "tcp", testConfig(t, testOrg))
		rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg, payload: func(p *proto.HandshakePayload) []byte {
			p.Identity, p.StaticSig = keyOf(victim), sig
			b, _ := p.Encode()
			return b
		}})
		if got := rec.next(t); !errors.Is(got, ErrIdentityBinding) {
			t.Fatalf("listener logged %v, want ErrIdentityBinding", got)
		}
	})
	t.Run("garbage-payload", func(t *testing.T) {
		checkLeaks(t)
		ln, rec := listenRec(t, "tcp", testConfig(t, testOrg))
		rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg, payload: func(*proto.HandshakePayload) []byte {
			return []byte{0xff} // not CBOR
		}})
		if got := rec.next(t); !errors.Is(got, ErrProtocol) || !errors.Is(got, proto.ErrMalformed) {
			t.Fatalf("listener logged %v", got)
		}
	})
}

// TestOversizedHandshakeRecord: a length prefix larger than the handshake
// message limit fails at once, without waiting for (or buffering) a body.
func TestOversizedHandshakeRecord(t *testing.T) {
	checkLeaks(t)
	b := testConfig(t, testOrg)
	b.HandshakeTimeout = 10 * time.Second
	ln, rec := listenRec(t, "tcp", b)
	conn, err := net.Dial("tcp", ln.Addr().Address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.Write([]byte{0xff, 0xff, 1, 2, 3})
	got := rec.next(t)
	if !errors.Is(got, ErrProtocol) {
		t.Fatalf("listener logged %v", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v; it waited for the body", d)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("connection not closed: %v", err)
	}

	// The initiator side: a responder sending a huge message 2.
	addr := rawServer(t, func(c net.Conn) {
		readRecord(c, make([]byte, maxRecord))
		c.Write([]byte{0xff, 0xff})
		io.Copy(io.Discard, c)
	})
	a := testConfig(t, testOrg)
	a.HandshakeTimeout = 10 * time.Second
	start = time.Now()
	_, err = Dial(context.Background(), addr, a, nil)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Dial = %v, want ErrProtocol", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v", d)
	}
}

// rawLink completes a handshake with a raw initiator and returns the raw
// side and the started accepted link.
func rawLink(t *testing.T, cfg Config) (*rawPeer, *Link) {
	t.Helper()
	ln := listen(t, "tcp", cfg)
	rp := rawDialer(t, ln, rawOpts{identity: newIdentity(t), org: testOrg})
	in, err := ln.Accept(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return rp, in
}

func TestOversizedFrame(t *testing.T) {
	t.Run("chunks-beyond-cap", func(t *testing.T) {
		checkLeaks(t)
		rp, in := rawLink(t, testConfig(t, testOrg))
		var frames int
		in.Start(func([]byte) { frames++ })
		chunk := make([]byte, maxChunk)
		// One legal frame of exactly MaxFrameSize first.
		sent := 0
		for sent+maxChunk < proto.MaxFrameSize {
			rp.sendMsg(hdrChunk, chunk)
			sent += maxChunk
		}
		rp.sendMsg(hdrFinal, chunk[:proto.MaxFrameSize-sent])
		// Then chunks that never end.
		go func() {
			for i := 0; i < 2*proto.MaxFrameSize/maxChunk; i++ {
				if rp.sendMsg(hdrChunk, chunk) != nil {
					return
				}
			}
		}()
		err := waitDone(t, in, 5*time.Second)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("Err = %v, want ErrFrameTooLarge", err)
		}
		if st := in.Stats(); st.FrameTooLarge != 1 || st.FramesIn != 1 || frames != 1 {
			t.Errorf("stats %+v, handler saw %d frames", st, frames)
		}
	})
	t.Run("final-chunk-beyond-cap", func(t *testing.T) {
		checkLeaks(t)
		rp, in := rawLink(t, testConfig(t, testOrg))
		in.Start(nil)
		chunk := make([]byte, maxChunk)
		go func() {
			for sent := 0; sent < proto.MaxFrameSize-maxChunk; sent += maxChunk {
				if rp.sendMsg(hdrChunk, chunk) != nil {
					return
				}
			}
			rp.sendMsg(hdrFinal, chunk)
		}()
		if err := waitDone(t, in, 5*time.Second); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("Err = %v, want ErrFrameTooLarge", err)
		}
	})
}

func TestMalformedTransport(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(rp *rawPeer) error
	}{
		{"short-record", func(rp *rawPeer) error { return writeRecord(rp.conn, make([]byte, minTransport-1)) }},
		{"empty-record", func(rp *rawPeer) error { return writeRecord(rp.conn, nil) }},
		{"bad-tag", func(rp *rawPeer) error { return writeRecord(rp.conn, make([]byte, 100)) }},
		{"unknown-header", func(rp *rawPeer) error { return rp.sendMsg(9, nil) }},
		{"ping-with-body", func(rp *rawPeer) error { return rp.sendMsg(hdrPing, []byte{1}) }},
		{"empty-plaintext", func(rp *rawPeer) error {
			ct, _ := rp.send.Encrypt(nil, nil, nil)
			return writeRecord(rp.conn, ct)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			rp, in := rawLink(t, testConfig(t, testOrg))
			in.Start(nil)
			if err := tc.send(rp); err != nil {
				t.Fatal(err)
			}
			if err := waitDone(t, in, 3*time.Second); !errors.Is(err, ErrProtocol) {
				t.Fatalf("Err = %v, want ErrProtocol", err)
			}
		})
	}
}

// TestRawPeerInterop: frames chunked by hand arrive as one frame, pings
// interleaved between chunks are answered, and a pong comes back.
func TestRawPeerInterop(t *testing.T) {
	checkLeaks(t)
	rp, in := rawLink(t, testConfig(t, testOrg))
	c := newCollector(4)
	in.Start(c.handle)
	rp.sendMsg(hdrChunk, []byte("hel"))
	rp.sendMsg(hdrPing, nil)
	rp.sendMsg(hdrChunk, nil)
	rp.sendMsg(hdrFinal, []byte("lo"))
	rp.sendMsg(hdrFinal, nil)
	if f := c.next(t); string(f) != "hello" {
		t.Fatalf("frame %q", f)
	}
	if f := c.next(t); len(f) != 0 {
		t.Fatalf("frame %q, want empty", f)
	}
	buf := make([]byte, maxRecord)
	rp.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	rec, err := readRecord(rp.br, buf)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := rp.recv.Decrypt(nil, nil, rec)
	if err != nil || len(pt) != 1 || pt[0] != hdrPong {
		t.Fatalf("got %x, %v; want a pong", pt, err)
	}
	if st := in.Stats(); st.PingsIn != 1 {
		t.Errorf("stats %+v", st)
	}
}
