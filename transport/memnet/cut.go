package memnet

import (
	"net/netip"
	"sync"
)

// path is the way between two hosts, which Cut can break: what is
// written on its connections waits (in the writer's buffer, as in TCP's
// while its segments are lost) until Heal, and dials across it get no
// answer until their context ends.
type path struct {
	mu      sync.Mutex
	cut     bool
	changed chan struct{} // closed and replaced at each Cut and Heal
}

// state reports whether the path is cut, and a channel closed at its
// next change.
func (p *path) state() (cut bool, changed <-chan struct{}) {
	if p == nil {
		return false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.changed
}

func (p *path) set(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == cut {
		return
	}
	p.cut = cut
	close(p.changed)
	p.changed = make(chan struct{})
}

// pathLocked returns the path between hosts a and b, nil for a host and
// itself; the caller holds mu.
func (n *Network) pathLocked(a, b netip.Addr) *path {
	if a == b {
		return nil
	}
	if b.Less(a) {
		a, b = b, a
	}
	k := [2]netip.Addr{a, b}
	p := n.paths[k]
	if p == nil {
		p = &path{changed: make(chan struct{})}
		n.paths[k] = p
	}
	return p
}

// Cut breaks the way between hosts a and b, as a pulled cable does:
// their TCP connections deliver nothing, in either direction, and say
// nothing of a close, until Heal; a writer fills its buffer, then
// blocks. Dials between them wait until their context ends. Nothing
// tells either end: a link finds out by its own timers (its idle
// timeout), as over TCP without the kernel's keepalive probes.
func (n *Network) Cut(a, b netip.Addr) { n.path(a, b).set(true) }

// Heal restores the way Cut broke: what was written is delivered.
func (n *Network) Heal(a, b netip.Addr) { n.path(a, b).set(false) }

func (n *Network) path(a, b netip.Addr) *path {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pathLocked(a.Unmap(), b.Unmap())
}
