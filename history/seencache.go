package history

import "sync"

// seenCache is a bounded set of (from, id) keys in front of the seen
// bucket. It evicts in insertion order, which for envelopes is close to
// arrival order: duplicates arrive within seconds of the original.
//
// It grows with use up to size entries: allocated whole up front, the
// default 65,536 cost a node 12.8 MB of heap before its first envelope,
// and twice that in RSS once the garbage collector's headroom is counted.
type seenCache struct {
	size int
	mu   sync.Mutex // guards set, ring and next
	set  map[[seenKLen]byte]struct{}
	ring [][seenKLen]byte
	next int // ring slot the next insertion overwrites
}

func newSeenCache(size int) *seenCache {
	return &seenCache{size: size, set: map[[seenKLen]byte]struct{}{}}
}

func (c *seenCache) has(k [seenKLen]byte) bool {
	c.mu.Lock()
	_, ok := c.set[k]
	c.mu.Unlock()
	return ok
}

func (c *seenCache) add(k [seenKLen]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.ring) < c.size {
		c.ring = append(c.ring, k)
	} else {
		delete(c.set, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
	}
	c.set[k] = struct{}{}
}

func (c *seenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.set)
}
