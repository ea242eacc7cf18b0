package history

import "testing"

// TestSeenCacheBounded: the cache keeps the newest size keys, evicting
// in insertion order, and holds nothing before it is used.
func TestSeenCacheBounded(t *testing.T) {
	t.Parallel()
	c := newSeenCache(3)
	if len(c.ring) != 0 || cap(c.ring) != 0 {
		t.Fatalf("a fresh cache holds a ring of cap %d", cap(c.ring))
	}
	key := func(i byte) (k [seenKLen]byte) { k[0] = i; return k }
	for i := range byte(5) {
		c.add(key(i))
		c.add(key(i)) // a repeat takes no slot
	}
	if c.len() != 3 {
		t.Fatalf("len %d, want 3", c.len())
	}
	for i := range byte(5) {
		if got, want := c.has(key(i)), i >= 2; got != want {
			t.Errorf("has(%d) = %v, want %v", i, got, want)
		}
	}
}
