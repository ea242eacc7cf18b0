package node

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/transport"
)

// stallProxy forwards TCP connections to a target until stalled; then it
// stops forwarding and keeps the target's side of every connection open,
// as a peer whose host vanished without a FIN would.
type stallProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	stalled bool
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() transport.Addr {
	return transport.Addr{Network: "tcp", Address: p.ln.Addr().String()}
}

func (p *stallProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(c, s)
		go p.pump(s, c)
	}
}

func (p *stallProxy) pump(from, to net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		k, err := from.Read(buf)
		p.mu.Lock()
		stalled := p.stalled
		p.mu.Unlock()
		if stalled {
			// Swallow everything; close nothing until the test ends.
			_, _ = io.Copy(io.Discard, from)
			return
		}
		if k > 0 {
			if _, werr := to.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			to.Close()
			return
		}
	}
}

func (p *stallProxy) stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// A peer that restarts while the other end still holds its previous
// process's link (no FIN arrived) must get its new link accepted at once,
// not wait for the stale one to idle out. Each round has even odds of
// failing under a tie-break that ignores the restart, so three rounds
// catch that.
func TestRestartedPeerReplacesStaleLink(t *testing.T) {
	t.Parallel()
	m := newSyncMesh(t, 2)
	// No Unix listener: the link must stay on the proxy, not move to a's
	// socket (node/peers/move.go).
	a := m.startWith(0, func(c *Config) { c.NoUnixListener = true })
	p, err := a.chans.CreateChannel(api.CreateChannel{Name: "ch"})
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		px := newStallProxy(t, tcpAddr(t, a).Address)
		b := m.startWith(1, func(c *Config) { c.NoUnixListener = true }, px.addr())
		waitPolicy(t, b, "ch")
		// Both ends: b may count the link before a has admitted it, and
		// a stall then would leave a without the link the test needs.
		waitFor(t, 5*time.Second, "link through the proxy", func() bool {
			return linked(b, m.ids[0].Pub) && linked(a, m.ids[1].Pub)
		})
		px.stall()
		b.Close()
		// a still sees b linked: the stale link has not idled out.
		if !linked(a, m.ids[1].Pub) {
			t.Fatalf("round %d: a dropped the stalled link; the test needs it held", round)
		}
		b = m.startWith(1, func(c *Config) { c.NoUnixListener = true }, tcpAddr(t, a))
		waitFor(t, 5*time.Second, "b linked directly", func() bool { return linked(b, m.ids[0].Pub) })
		if _, err := b.out.Send(api.Send{To: "#ch", Body: fmt.Sprintf("round %d", round)}); err != nil {
			t.Fatal(err)
		}
		// Well inside the 15 s idle timeout that would free a stale link.
		waitFor(t, 10*time.Second, fmt.Sprintf("round %d message live at a", round), func() bool {
			return channelCount(a, p.ID) == round
		})
		// The new process's first link was the one kept.
		if d := b.Backend().Counters()["link.down"]; d != 0 {
			t.Fatalf("round %d: the restarted b lost %d links before one stuck", round, d)
		}
		b.Close()
	}
	if a.Backend().Counters()["link.duplicate"] < 3 {
		t.Fatalf("link.duplicate = %d, want the three stale links replaced", a.Backend().Counters()["link.duplicate"])
	}
}
