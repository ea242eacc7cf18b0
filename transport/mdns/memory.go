package mdns

import (
	"slices"
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// Memory is the in-memory twin of mDNS for tests: a hub on which every
// member sees every other member of its org, with no sockets involved.
//
// It keeps the real thing's contract but none of its losses: a member is
// told about each peer of its org that joins (and about those already
// there when it joins), and again whenever one changes its roster version.
// Reports queue per member and coalesce per peer (the newest wins), so
// none is dropped however slowly Peers is read. As with mDNS, a member that
// leaves is not announced as gone.
type Memory struct {
	mu      sync.Mutex
	members map[*MemoryMember]struct{} // guarded by mu
}

// NewMemory returns an empty hub.
func NewMemory() *Memory {
	return &Memory{members: map[*MemoryMember]struct{}{}}
}

// Join adds a member that advertises self and sees the other members whose
// Org equals self.Org. self.Seen is ignored; reports carry the time they
// were queued.
func (h *Memory) Join(self Peer) *MemoryMember {
	m := &MemoryMember{
		hub:     h,
		self:    clonePeer(self),
		out:     make(chan Peer, peersBuffer),
		pending: map[proto.PubKey]Peer{},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	h.mu.Lock()
	for o := range h.members {
		if o.self.Org == m.self.Org {
			o.enqueue(m.self)
			m.enqueue(o.self)
		}
	}
	h.members[m] = struct{}{}
	h.mu.Unlock()
	m.wg.Add(1)
	go m.deliver()
	return m
}

// MemoryMember is one node on a [Memory] hub. It implements [Advertiser].
type MemoryMember struct {
	hub  *Memory
	self Peer // guarded by hub.mu
	out  chan Peer

	mu      sync.Mutex
	pending map[proto.PubKey]Peer // guarded by mu: newest undelivered report per peer
	order   []proto.PubKey        // guarded by mu: pending keys, oldest first
	closed  bool                  // guarded by mu

	wake      chan struct{} // capacity 1: something was queued
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Peers implements [Discovery].
func (m *MemoryMember) Peers() <-chan Peer { return m.out }

// SetRosterVersion changes the advertised roster version and tells the
// other members of the org.
func (m *MemoryMember) SetRosterVersion(v uint64) error {
	h := m.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.members[m]; !ok {
		return ErrClosed
	}
	m.self.RosterVersion = v
	for o := range h.members {
		if o != m && o.self.Org == m.self.Org {
			o.enqueue(m.self)
		}
	}
	return nil
}

// Close leaves the hub, stops delivery and closes the Peers channel. It is
// safe to call more than once.
func (m *MemoryMember) Close() error {
	m.closeOnce.Do(func() {
		m.hub.mu.Lock()
		delete(m.hub.members, m)
		m.hub.mu.Unlock()
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		close(m.done)
		m.wg.Wait()
	})
	return nil
}

// enqueue queues a report of p, replacing any undelivered one.
func (m *MemoryMember) enqueue(p Peer) {
	p = clonePeer(p)
	p.Seen = time.Now()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	if _, ok := m.pending[p.Key]; !ok {
		m.order = append(m.order, p.Key)
	}
	m.pending[p.Key] = p
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest pending report.
func (m *MemoryMember) next() (Peer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.order) == 0 {
		return Peer{}, false
	}
	k := m.order[0]
	m.order = m.order[1:]
	p := m.pending[k]
	delete(m.pending, k)
	return p, true
}

// deliver moves pending reports to the Peers channel until Close.
func (m *MemoryMember) deliver() {
	defer m.wg.Done()
	defer close(m.out)
	for {
		p, ok := m.next()
		if !ok {
			select {
			case <-m.wake:
				continue
			case <-m.done:
				return
			}
		}
		select {
		case m.out <- p:
		case <-m.done:
			return
		}
	}
}

func clonePeer(p Peer) Peer {
	p.Addrs = slices.Clone(p.Addrs)
	return p
}
