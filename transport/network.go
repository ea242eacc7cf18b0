package transport

import (
	"context"
	"net"
)

// Network is what links run over: the listeners [Listen] opens and the
// connections [Dial] makes, by [Addr]. [Config.Net] nil is the host's
// TCP and Unix sockets, with the keepalive settings of tcpalive.go; an
// in-memory Network (transport/memnet) lets tests build nodes whose
// links never touch a socket.
type Network interface {
	// Listen listens on a, which has passed Addr's checks. The
	// listener's Addr is the bound address: the port chosen for tcp
	// port 0.
	Listen(ctx context.Context, a Addr) (net.Listener, error)
	// Dial connects to a within ctx. The connection's LocalAddr().Network()
	// is a.Network ("tcp" or "unix").
	Dial(ctx context.Context, a Addr) (net.Conn, error)
}
