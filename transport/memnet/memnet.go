package memnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"

	"github.com/meshd/meshd/transport"
)

// backlog is how many connections a listener holds that it has not
// accepted; a dial past it waits for room, within its context, as a
// connect to a full accept queue does.
const backlog = 128

// firstPort is the first port handed out for port 0 and to the dialling
// ends of TCP connections.
const firstPort = 40000

// Network is an in-memory network of hosts: listeners by address and
// connections between them. Create it with [New]; it holds no goroutine
// and needs no Close.
type Network struct {
	mu       sync.Mutex
	lns      map[key]*listener
	paths    map[[2]netip.Addr]*path // by the pair of hosts, lower first
	nextPort int
	buffer   int
}

// key names a listener: a TCP address, on one host when it is a
// loopback address (host zero otherwise), or a host's Unix socket path.
type key struct {
	host    netip.Addr
	network string
	addr    string
}

// New returns an empty network whose connections buffer DefaultBuffer
// bytes each way.
func New() *Network {
	return &Network{lns: map[key]*listener{}, paths: map[[2]netip.Addr]*path{}, nextPort: firstPort, buffer: DefaultBuffer}
}

// Host returns the view of the network from the host with address ip:
// the [transport.Network] of a node on that host. Its TCP listeners on
// the unspecified address (tcp://:0, tcp://0.0.0.0:port) are bound to
// ip; its loopback addresses and Unix socket paths are its own.
func (n *Network) Host(ip netip.Addr) *Host { return &Host{n: n, ip: ip.Unmap()} }

// Host is one host's view of a [Network]; it implements
// [transport.Network].
type Host struct {
	n  *Network
	ip netip.Addr
}

var _ transport.Network = (*Host)(nil)

// IP is the host's address.
func (h *Host) IP() netip.Addr { return h.ip }

// port returns a port not handed out yet; the caller holds mu.
func (n *Network) portLocked() int {
	p := n.nextPort
	n.nextPort++
	return p
}

// resolve names the listener at a as seen from h, and its address.
// bind says a is being listened on: the unspecified address is h's own,
// and port 0 is a new port (assigned by the caller, who holds mu).
func (h *Host) resolve(a transport.Addr, bind bool) (key, net.Addr, error) {
	if a.Network == "unix" {
		return key{host: h.ip, network: "unix", addr: a.Address}, &net.UnixAddr{Name: a.Address, Net: "unix"}, nil
	}
	host, portStr, err := net.SplitHostPort(a.Address)
	if err != nil {
		return key{}, nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return key{}, nil, fmt.Errorf("bad port %q", portStr)
	}
	ip := h.ip
	if host != "" {
		if ip, err = netip.ParseAddr(host); err != nil {
			return key{}, nil, fmt.Errorf("memnet resolves no names: %q", host)
		}
		ip = ip.Unmap()
	}
	if ip.IsUnspecified() {
		if !bind {
			return key{}, nil, syscall.ECONNREFUSED
		}
		ip = h.ip
	}
	if bind && ip != h.ip && !ip.IsLoopback() {
		return key{}, nil, syscall.EADDRNOTAVAIL
	}
	if bind && port == 0 {
		port = h.n.portLocked()
	}
	k := key{network: "tcp", addr: netip.AddrPortFrom(ip, uint16(port)).String()}
	if ip.IsLoopback() {
		k.host = h.ip
	}
	return k, net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port))), nil
}

// Listen listens on a: a TCP address of this host (its IP, the
// unspecified address or a loopback address) or a Unix socket path.
func (h *Host) Listen(ctx context.Context, a transport.Addr) (net.Listener, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.n.mu.Lock()
	defer h.n.mu.Unlock()
	k, addr, err := h.resolve(a, true)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: a.Network, Err: err}
	}
	if h.n.lns[k] != nil {
		return nil, &net.OpError{Op: "listen", Net: a.Network, Addr: addr, Err: syscall.EADDRINUSE}
	}
	ln := &listener{n: h.n, key: k, addr: addr, queue: make(chan *conn, backlog), closed: make(chan struct{})}
	h.n.lns[k] = ln
	return ln, nil
}

// Dial connects to the listener at a, as seen from this host: refused
// at once when nothing listens there.
func (h *Host) Dial(ctx context.Context, a transport.Addr) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: a.Network, Err: err}
	}
	h.n.mu.Lock()
	k, addr, err := h.resolve(a, false)
	ln := h.n.lns[k]
	var local net.Addr
	var way *path
	if err == nil {
		local = &net.UnixAddr{Net: "unix"} // unnamed, as a dialling Unix socket is
		if a.Network == "tcp" {
			ip := h.ip
			to := addr.(*net.TCPAddr).AddrPort().Addr().Unmap()
			if to.IsLoopback() {
				ip = netip.MustParseAddr("127.0.0.1")
			} else {
				way = h.n.pathLocked(h.ip, to)
			}
			local = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(h.n.portLocked())))
		}
	}
	size := h.n.buffer
	h.n.mu.Unlock()
	if cut, _ := way.state(); cut && err == nil {
		<-ctx.Done() // no answer across a cut
		err = ctx.Err()
	}
	if err == nil && ln == nil {
		err = syscall.ECONNREFUSED
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: a.Network, Addr: addr, Err: err}
	}
	c, s := newConn(local, addr, size, way)
	select {
	case ln.queue <- s:
	case <-ln.closed:
		return nil, &net.OpError{Op: "dial", Net: a.Network, Addr: addr, Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: a.Network, Addr: addr, Err: ctx.Err()}
	}
	return c, nil
}

// listener is a listening address: Dial queues the server ends of its
// connections, Accept takes them.
type listener struct {
	n         *Network
	key       key
	addr      net.Addr
	queue     chan *conn
	closeOnce sync.Once
	closed    chan struct{}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.queue:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: l.addr.Network(), Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops the listener and frees its address; the connections it
// had not accepted are closed, so their dialling ends read EOF.
func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		l.n.mu.Lock()
		if l.n.lns[l.key] == l {
			delete(l.n.lns, l.key)
		}
		l.n.mu.Unlock()
		close(l.closed)
		for {
			select {
			case c := <-l.queue:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }
