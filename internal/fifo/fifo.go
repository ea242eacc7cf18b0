// Package fifo is a map bounded in keys that forgets the oldest.
package fifo

// Map is a map that holds at most max keys: adding a key beyond that
// forgets the oldest. It remembers recent ids in bounded memory. It is
// not safe for concurrent use.
type Map[K comparable, V any] struct {
	m     map[K]V
	order []K // ring of the keys in insertion order
	next  int // index in order of the oldest key once the ring is full
	max   int
}

// New returns an empty Map of at most max keys.
func New[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{m: map[K]V{}, max: max}
}

// Put sets k to v. A new key beyond max evicts the oldest key; an update
// keeps k's place.
func (f *Map[K, V]) Put(k K, v V) {
	if _, ok := f.m[k]; ok {
		f.m[k] = v
		return
	}
	f.m[k] = v
	if len(f.order) < f.max {
		f.order = append(f.order, k)
		return
	}
	delete(f.m, f.order[f.next])
	f.order[f.next] = k
	f.next = (f.next + 1) % f.max
}

// Get returns k's value and whether k is held.
func (f *Map[K, V]) Get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}

// Len returns the number of keys held.
func (f *Map[K, V]) Len() int { return len(f.m) }
