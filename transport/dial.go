package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/meshd/meshd/proto"
)

// Dial connects to addr and runs the initiator handshake. If expect is not
// nil, the responder's identity must equal it, or Dial fails with
// [ErrUnexpectedPeer] before sending message 3. The link is not started.
func Dial(ctx context.Context, addr Addr, cfg Config, expect *proto.PubKey) (*Link, error) {
	if err := addr.check(); err != nil {
		return nil, err
	}
	ep, err := newEndpoint(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := ep.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	link, err := ep.client(ctx, conn, expect)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return link, nil
}

// dial connects to addr, on the configured network or the host's, within
// HandshakeTimeout.
func (e *endpoint) dial(ctx context.Context, addr Addr) (net.Conn, error) {
	if e.cfg.Net != nil {
		ctx, cancel := context.WithTimeout(ctx, e.cfg.HandshakeTimeout)
		defer cancel()
		return e.cfg.Net.Dial(ctx, addr)
	}
	d := net.Dialer{Timeout: e.cfg.HandshakeTimeout, KeepAliveConfig: tcpKeepAlive, Control: setDeadAfter}
	return d.DialContext(ctx, addr.Network, addr.Address)
}

// Client runs the initiator side of the handshake on conn and returns the
// link, not yet started. If expect is not nil, the responder's identity
// must equal it. Client takes ownership of conn and closes it on failure.
// Use it to run links over any stream, such as net.Pipe in tests.
func Client(ctx context.Context, conn net.Conn, cfg Config, expect *proto.PubKey) (*Link, error) {
	e, err := newEndpoint(cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return e.client(ctx, conn, expect)
}

// Server runs the responder side of the handshake on conn and returns the
// link, not yet started. Server takes ownership of conn and closes it on
// failure.
func Server(ctx context.Context, conn net.Conn, cfg Config) (*Link, error) {
	e, err := newEndpoint(cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return e.server(ctx, conn)
}

func (e *endpoint) client(ctx context.Context, conn net.Conn, expect *proto.PubKey) (*Link, error) {
	br := bufio.NewReaderSize(conn, readBufferSize)
	res, err := e.handshake(ctx, conn, br, true, expect)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return newLink(conn, br, res, true, e.cfg), nil
}

func (e *endpoint) server(ctx context.Context, conn net.Conn) (*Link, error) {
	return e.serverBuffered(ctx, conn, bufio.NewReaderSize(conn, readBufferSize))
}

// serverBuffered is server reading through br, which may hold message 1
// already. A peer that completed the handshake but was refused by Admit
// is handed to Config.Refused on a link that can send frames before it
// closes.
func (e *endpoint) serverBuffered(ctx context.Context, conn net.Conn, br *bufio.Reader) (*Link, error) {
	res, err := e.handshake(ctx, conn, br, false, nil)
	if err != nil {
		if res.send != nil && e.cfg.Refused != nil && errors.Is(err, ErrNotAdmitted) {
			l := newLink(conn, br, res, false, e.cfg)
			e.cfg.Refused(l, err)
			_ = l.Close() // writes what Refused sent, for at most a second
			return nil, err
		}
		conn.Close()
		return nil, err
	}
	return newLink(conn, br, res, false, e.cfg), nil
}
