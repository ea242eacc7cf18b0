package transport

import (
	"container/list"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// gate admits unauthenticated connections to a [Listener], in the manner
// of OpenSSH's MaxStartups: at most perSource handshakes in progress per
// source (a remote IPv4 address or IPv6 /64; all Unix-socket connections
// are one source, see sourceOf), and at most max in all. When the total
// is reached, the oldest connection that has sent nothing yet is shed to
// make room; failing that, the oldest whose handshake has stalled for
// stallAfter; failing that, the new connection is refused.
type gate struct {
	max, perSource int

	mu       sync.Mutex // guards the fields below
	order    *list.List // of *pendingConn, oldest first
	bySource map[string]int

	shedSource, shedIdle, shedStalled, shedFull atomic.Uint64
}

// stallAfter is how long a handshake may take before, with every place
// taken, it may be shed for a new connection. A handshake is two round
// trips and a few DH operations: milliseconds on a LAN, well under a
// second across the world.
const stallAfter = time.Second

// pendingConn is one connection between accept and the delivery of its
// link (or its failure).
type pendingConn struct {
	conn   net.Conn
	src    string
	since  time.Time
	elem   *list.Element
	active atomic.Bool // has sent a byte
	done   atomic.Bool // handshake over: a link waiting for Accept, never shed
	shed   atomic.Bool // closed to make room
}

func newGate(max, perSource int) *gate {
	return &gate{max: max, perSource: perSource, order: list.New(), bySource: map[string]int{}}
}

// sourceOf names the source a connection is limited by: the remote IP for
// TCP. A Unix socket's peers are all this user's processes (the socket is
// 0600 in a 0700 home) and have no address, so they share one source
// that is not limited per source: the limit is there to keep one remote
// host from taking every place, and a local process of this user could
// take the node's identity key anyway.
//
// An IPv6 source is its /64: a host is usually given a whole /64, so
// counting single addresses would give it 2^64 sources.
func sourceOf(c net.Conn) (src string, limited bool) {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return "local", false
	}
	if ip4 := a.IP.To4(); ip4 != nil {
		return ip4.String(), true
	}
	return a.IP.Mask(net.CIDRMask(64, 128)).String() + "/64", true
}

// admit takes c in, or refuses it (nil). shed, if not nil, is an idle
// connection the caller must close to make room.
func (g *gate) admit(c net.Conn, now time.Time) (pc, shed *pendingConn) {
	src, limited := sourceOf(c)
	g.mu.Lock()
	defer g.mu.Unlock()
	if limited && g.bySource[src] >= g.perSource {
		g.shedSource.Add(1)
		return nil, nil
	}
	if g.order.Len() >= g.max {
		var stalled *pendingConn
		for e := g.order.Front(); e != nil; e = e.Next() {
			old := e.Value.(*pendingConn)
			if old.done.Load() {
				continue
			}
			if !old.active.Load() {
				shed = old
				break
			}
			if stalled == nil && now.Sub(old.since) >= stallAfter {
				stalled = old
			}
		}
		switch {
		case shed != nil:
			g.shedIdle.Add(1)
		case stalled != nil:
			shed = stalled
			g.shedStalled.Add(1)
		default:
			g.shedFull.Add(1)
			return nil, nil
		}
		shed.shed.Store(true)
		g.removeLocked(shed)
	}
	pc = &pendingConn{conn: c, src: src, since: now}
	pc.elem = g.order.PushBack(pc)
	g.bySource[src]++
	return pc, shed
}

// release gives pc's place back. A shed connection gave it up already.
func (g *gate) release(pc *pendingConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(pc)
}

func (g *gate) removeLocked(pc *pendingConn) {
	if pc.elem == nil {
		return
	}
	g.order.Remove(pc.elem)
	pc.elem = nil
	if g.bySource[pc.src]--; g.bySource[pc.src] <= 0 {
		delete(g.bySource, pc.src)
	}
}

// pending returns the connections in the gate.
func (g *gate) pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.order.Len()
}
