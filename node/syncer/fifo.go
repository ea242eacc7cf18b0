package syncer

import (
	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// ref names an envelope: its sender and id.
type ref struct {
	from proto.PubKey
	id   uuid.UUID
}

func refOf(se *proto.SignedEnvelope) ref { return ref{se.From, se.ID} }

// fifoMap is a map that holds at most max keys: adding a key beyond that
// forgets the oldest. It remembers served request ids in bounded memory.
// It is not safe for concurrent use.
type fifoMap[K comparable, V any] struct {
	m     map[K]V
	order []K // ring of the keys in insertion order
	next  int // index in order of the oldest key once the ring is full
	max   int
}

func newFIFOMap[K comparable, V any](max int) *fifoMap[K, V] {
	return &fifoMap[K, V]{m: map[K]V{}, max: max}
}

// put sets k to v. A new key beyond max evicts the oldest key; an update
// keeps k's place.
func (f *fifoMap[K, V]) put(k K, v V) {
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

// get returns k's value and whether k is held.
func (f *fifoMap[K, V]) get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}
