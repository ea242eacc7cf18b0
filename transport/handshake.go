package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/flynn/noise"

	"github.com/meshd/meshd/proto"
)

// readBufferSize is the buffered reader in front of each connection
// during the handshake: it holds the handshake messages. An established
// link reads through a [recvReader] and holds no such buffer.
const readBufferSize = 4 << 10

// aLongTimeAgo is a deadline in the past, used to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// endpoint is a Config made ready for handshakes: defaults applied, static
// key chosen and the identity binding signed.
type endpoint struct {
	cfg      Config
	key      *StaticKey
	id       proto.PubKey
	sig      proto.Signature
	prologue []byte
	random   io.Reader // ephemeral keys; nil means crypto/rand (tests fix it for vectors)
}

func newEndpoint(cfg Config) (*endpoint, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	key := cfg.NoiseKey
	if key == nil {
		if key, err = NewStaticKey(); err != nil {
			return nil, err
		}
	}
	id, sig := key.binding(cfg.Identity)
	return &endpoint{cfg: cfg, key: key, id: id, sig: sig, prologue: proto.Prologue(cfg.Org)}, nil
}

// localPayload encodes our handshake payload. It runs our own payload
// through the peer's parser so that a bad local value (too many listen
// addresses, say) fails here with a clear error, not at the peer.
//
// The responder's payload (message 2) goes to anyone who knows the org
// id, before the initiator has said who it is, so it carries only what
// the initiator needs to decide: identity, binding, org and roster
// version (and policy digest). Name and listen addresses are left out;
// the roster names members, and a node tells its peers its addresses
// once linked (a peer list entry for itself).
func (e *endpoint) localPayload(initiator bool) ([]byte, error) {
	var p proto.HandshakePayload
	if e.cfg.Payload != nil {
		p = e.cfg.Payload()
	}
	if !initiator {
		p.Listen, p.Name, p.Fresh = nil, "", nil
	}
	if !e.cfg.Knock {
		p.Fresh = nil
	}
	p.Version = proto.ProtocolVersion
	p.Identity = e.id
	p.StaticSig = e.sig
	p.Org = e.cfg.Org
	b, err := p.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode local payload: %w", err)
	}
	if _, err := proto.ParseHandshakePayload(b); err != nil {
		return nil, fmt.Errorf("local payload: %w", err)
	}
	return b, nil
}

// checkPeer decodes a peer payload and checks its org and identity binding
// against the static key the peer proved in the handshake.
// In a knock the orgs may differ: learning the peer's is its purpose.
func (e *endpoint) checkPeer(payload, static []byte, knock bool) (*proto.HandshakePayload, error) {
	p, err := proto.ParseHandshakePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	p.Knock = knock
	if p.Fresh != nil && !knock {
		return nil, fmt.Errorf("%w: peer %s sent a fresh roster outside a knock", ErrProtocol, p.Identity.Fingerprint())
	}
	if p.Org != e.cfg.Org && !knock {
		return nil, fmt.Errorf("%w: peer %s says org %q, we are %q", ErrWrongOrg, p.Identity.Fingerprint(), p.Org, e.cfg.Org)
	}
	if err := p.VerifyStatic(static); err != nil {
		return nil, fmt.Errorf("%w: peer %s: %w", ErrIdentityBinding, p.Identity.Fingerprint(), err)
	}
	return p, nil
}

// admit runs the Admit hook.
func (e *endpoint) admit(p *proto.HandshakePayload) error {
	if e.cfg.Admit == nil {
		return nil
	}
	if err := e.cfg.Admit(p); err != nil {
		return fmt.Errorf("%w: peer %s: %w", ErrNotAdmitted, p.Identity.Fingerprint(), err)
	}
	return nil
}

// hsConn does the deadline and record work of one handshake.
type hsConn struct {
	ctx     context.Context
	conn    net.Conn
	br      *bufio.Reader
	timeout time.Duration
	buf     [maxHandshakeMsg]byte
}

// step sets the deadline for the next read or write: HandshakeTimeout
// from now, or the context's deadline if sooner. It checks ctx after
// setting the deadline, so a cancellation that races with it is never
// overwritten by a later deadline (see handshake).
func (h *hsConn) step() error {
	d := time.Now().Add(h.timeout)
	if dl, ok := h.ctx.Deadline(); ok && dl.Before(d) {
		d = dl
	}
	if err := h.conn.SetDeadline(d); err != nil {
		return err
	}
	return h.ctx.Err()
}

func (h *hsConn) write(msg []byte) error {
	if err := h.step(); err != nil {
		return h.ioErr(err)
	}
	rec, err := appendRecord(make([]byte, 0, 2+len(msg)), msg)
	if err != nil {
		return err
	}
	_, err = h.conn.Write(rec)
	return h.ioErr(err)
}

// read reads one record of at most limit bytes.
func (h *hsConn) read(limit int) ([]byte, error) {
	if err := h.step(); err != nil {
		return nil, h.ioErr(err)
	}
	b, err := readRecord(h.br, h.buf[:limit])
	return b, h.ioErr(err)
}

func (h *hsConn) ioErr(err error) error {
	switch {
	case err == nil:
		return nil
	case h.ctx.Err() != nil:
		return context.Cause(h.ctx)
	case errors.Is(err, os.ErrDeadlineExceeded) && h.ctxExpired():
		// The conn deadline was the context's, and fired first.
		return context.DeadlineExceeded
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: no progress for %v", ErrTimeout, h.timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("connection closed by peer: %w", err)
	}
	return err
}

func (h *hsConn) ctxExpired() bool {
	dl, ok := h.ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// hsResult is a completed handshake.
type hsResult struct {
	peer       *proto.HandshakePayload
	send, recv *noise.CipherState
	hash       []byte // the final handshake hash, equal on both sides
	static     []byte // the peer's Noise static public key
}

// handshake runs Noise XX on conn. The returned error wraps ErrHandshake.
func (e *endpoint) handshake(ctx context.Context, conn net.Conn, br *bufio.Reader, initiator bool, expect *proto.PubKey) (res hsResult, err error) {
	// Cancelling ctx interrupts blocked I/O by moving the deadline into
	// the past. If the callback has started by the time we are done, it
	// may still move the deadline, so the handshake counts as cancelled.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() && err == nil {
			err = fmt.Errorf("%w: %w", ErrHandshake, context.Cause(ctx))
		}
		if err == nil {
			// If the conn died meanwhile (net.Pipe refuses deadlines once
			// the peer closed), the link's first read reports it.
			_ = conn.SetDeadline(time.Time{})
		}
	}()
	h := &hsConn{ctx: ctx, conn: conn, br: br, timeout: e.cfg.HandshakeTimeout}
	if initiator {
		var hs *noise.HandshakeState
		if hs, err = e.state(true, e.cfg.Knock); err != nil {
			return res, fmt.Errorf("%w: %w", ErrHandshake, err)
		}
		res, err = e.initiate(h, hs, expect)
	} else {
		res, err = e.respond(h)
	}
	if err != nil {
		if !errors.Is(err, ErrNotAdmitted) {
			res = hsResult{}
		}
		return res, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return res, nil
}

// state starts a Noise XX handshake, with the knock prologue if knock.
func (e *endpoint) state(initiator, knock bool) (*noise.HandshakeState, error) {
	prologue := e.prologue
	if knock {
		prologue = proto.KnockPrologue()
	}
	return noise.NewHandshakeState(noise.Config{
		CipherSuite:   cipherSuite,
		Pattern:       noise.HandshakeXX,
		Initiator:     initiator,
		Prologue:      prologue,
		StaticKeypair: e.key.dh,
		Random:        e.random,
	})
}

func (e *endpoint) initiate(h *hsConn, hs *noise.HandshakeState, expect *proto.PubKey) (hsResult, error) {
	var res hsResult
	var marker []byte
	if e.cfg.Knock {
		marker = proto.KnockMarker
	}
	msg, _, _, err := hs.WriteMessage(nil, marker)
	if err != nil {
		return res, fmt.Errorf("message 1: %w", err)
	}
	if err := h.write(msg); err != nil {
		return res, fmt.Errorf("message 1: %w", err)
	}

	msg, err = h.read(maxHandshakeMsg)
	if err != nil {
		return res, fmt.Errorf("message 2: %w", err)
	}
	payload, _, _, err := hs.ReadMessage(nil, msg)
	if err != nil {
		return res, fmt.Errorf("message 2: %w: %w (another org or protocol version, or altered in transit)", ErrProtocol, err)
	}
	peer, err := e.checkPeer(payload, hs.PeerStatic(), e.cfg.Knock)
	if err != nil {
		return res, fmt.Errorf("message 2: %w", err)
	}
	if expect != nil && !peer.Identity.Equal(*expect) {
		return res, fmt.Errorf("%w: got %s, want %s", ErrUnexpectedPeer, peer.Identity, *expect)
	}
	if err := e.admit(peer); err != nil {
		return res, err
	}

	ours, err := e.localPayload(true)
	if err != nil {
		return res, err
	}
	msg, send, recv, err := hs.WriteMessage(nil, ours)
	if err != nil {
		return res, fmt.Errorf("message 3: %w", err)
	}
	if err := h.write(msg); err != nil {
		return res, fmt.Errorf("message 3: %w", err)
	}
	return hsResult{peer: peer, send: send, recv: recv, hash: hs.ChannelBinding(), static: hs.PeerStatic()}, nil
}

func (e *endpoint) respond(h *hsConn) (hsResult, error) {
	var res hsResult
	msg, err := h.read(knockMsg1Len)
	if err != nil {
		return res, fmt.Errorf("message 1: %w", err)
	}
	// A knock's message 1 carries the marker as its cleartext payload.
	knock := e.cfg.AnswerKnocks && len(msg) == knockMsg1Len
	if len(msg) != msg1Len && !knock {
		return res, fmt.Errorf("message 1: %w: %d bytes, want %d", ErrProtocol, len(msg), msg1Len)
	}
	hs, err := e.state(false, knock)
	if err != nil {
		return res, fmt.Errorf("message 1: %w", err)
	}
	marker, _, _, err := hs.ReadMessage(nil, msg)
	if err != nil {
		return res, fmt.Errorf("message 1: %w: %w", ErrProtocol, err)
	}
	if knock && string(marker) != string(proto.KnockMarker) {
		return res, fmt.Errorf("message 1: %w: %d bytes without the knock marker", ErrProtocol, len(msg))
	}

	ours, err := e.localPayload(false)
	if err != nil {
		return res, err
	}
	msg, _, _, err = hs.WriteMessage(nil, ours)
	if err != nil {
		return res, fmt.Errorf("message 2: %w", err)
	}
	if err := h.write(msg); err != nil {
		return res, fmt.Errorf("message 2: %w", err)
	}

	msg, err = h.read(maxHandshakeMsg)
	if err != nil {
		return res, fmt.Errorf("message 3: %w", err)
	}
	payload, recv, send, err := hs.ReadMessage(nil, msg)
	if err != nil {
		return res, fmt.Errorf("message 3: %w: %w", ErrProtocol, err)
	}
	peer, err := e.checkPeer(payload, hs.PeerStatic(), knock)
	if err != nil {
		return res, fmt.Errorf("message 3: %w", err)
	}
	peer.Remote = h.conn.RemoteAddr().String()
	res = hsResult{peer: peer, send: send, recv: recv, hash: hs.ChannelBinding(), static: hs.PeerStatic()}
	if err := e.admit(peer); err != nil {
		// The session is complete: the caller may tell the peer why
		// (Config.Refused) before closing.
		return res, err
	}
	if knock {
		// A knock never becomes a link: Refused says what the knocking
		// node may learn, and the connection closes.
		return res, fmt.Errorf("%w: peer %s: %w", ErrNotAdmitted, peer.Identity.Fingerprint(), ErrKnock)
	}
	return res, nil
}
