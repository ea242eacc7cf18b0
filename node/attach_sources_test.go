package node

import (
	"testing"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

func keyN(b byte) proto.PubKey {
	var k proto.PubKey
	k[0] = b
	return k
}

// testSwarm is a swarm over a blob of chunks chunks whose sources are
// keys[0] (the sender) and the stripe owners, all linked.
func testSwarm(chunks int, sender proto.PubKey, owners []proto.PubKey, me proto.PubKey) *swarm {
	f := &fetch{a: proto.Attachment{Size: uint64(chunks) * proto.ChunkSize}, unavailable: map[proto.PubKey]time.Time{}}
	s := newSwarm(nil, f)
	add := func(k proto.PubKey) int {
		if i, ok := s.byKey[k]; ok {
			return i
		}
		s.byKey[k] = len(s.srcs)
		s.srcs = append(s.srcs, &fetchSource{key: k, link: &peers.Link{Key: k}})
		return len(s.srcs) - 1
	}
	s.sender = add(sender)
	for _, k := range stripeOwners(sender, append(owners, sender)) {
		if k.Equal(me) {
			s.owners = append(s.owners, -1)
			continue
		}
		s.owners = append(s.owners, add(k))
	}
	s.settle(nil, time.Now())
	return s
}

// TestStripeOwners: the readers other than the sender, sorted by key,
// each once.
func TestStripeOwners(t *testing.T) {
	t.Parallel()
	got := stripeOwners(keyN(5), []proto.PubKey{keyN(9), keyN(5), keyN(2), keyN(7), keyN(2)})
	want := []proto.PubKey{keyN(2), keyN(7), keyN(9)}
	if len(got) != len(want) {
		t.Fatalf("owners %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("owners %v, want %v", got, want)
		}
	}
}

// TestSwarmAsksOwnersFirst: a reader asks the sender only for its own
// stripe and each other stripe's owner for its; an owner passed over, or
// stalled (not yet for longer than blobStallAfter), gives way to the
// sender; every source keeps at most blobPerSource chunks outstanding.
func TestSwarmAsksOwnersFirst(t *testing.T) {
	t.Parallel()
	sender, me := keyN(1), keyN(3)
	owners := []proto.PubKey{keyN(2), me, keyN(4)} // stripes 0, 1 (mine), 2
	now := time.Now()
	s := testSwarm(9, sender, owners, me)
	missing := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	got := s.wants(missing, now)
	who := func(k proto.PubKey) []uint32 { return got[s.index(k)] }
	if w := who(sender); len(w) != 3 || w[0] != 1 || w[1] != 4 || w[2] != 7 {
		t.Fatalf("asked the sender for %v, want my stripe [1 4 7]", w)
	}
	if w := who(keyN(2)); len(w) != 3 || w[0] != 0 {
		t.Fatalf("asked owner 0 for %v", w)
	}
	if w := who(keyN(4)); len(w) != 3 || w[0] != 2 {
		t.Fatalf("asked owner 2 for %v", w)
	}

	// Owner 0 says not yet for its stripe: asked again after the retry
	// delay, and after blobStallAfter of nothing but not yet, the sender
	// is asked instead.
	for _, c := range []uint32{0, 3, 6} {
		s.f.noteNotYet(keyN(2), c)
	}
	s.settle(missing, now)
	if got := s.wants(missing, now); len(got) != 0 {
		t.Fatalf("asked again before the retry delay: %v", got)
	}
	later := now.Add(blobNotYetRetry + time.Millisecond)
	got = s.wants(missing, later)
	if w := who(keyN(2)); len(w) != 3 {
		t.Fatalf("not asked owner 0 again after its not yet: %v", got)
	}
	for _, c := range []uint32{0, 3, 6} {
		s.f.noteNotYet(keyN(2), c)
	}
	s.settle(missing, later)
	stall := now.Add(blobStallAfter + time.Second)
	s.settle(missing, stall)
	got = s.wants(missing, stall)
	if w := who(sender); len(w) != 3 || w[0] != 0 {
		t.Fatalf("a stalled owner's stripe asked of %v (sender %v)", got, who(sender))
	}

	// An owner that answers unavailable is passed over: its stripe goes
	// to the sender at once.
	s.f.passOver(keyN(4))
	s.settle(missing, stall)
	got = s.wants(missing, stall)
	if w := who(sender); len(w) != 3 || w[0] != 2 {
		t.Fatalf("a passed-over owner's stripe asked of %v", got)
	}

	// A DM has no stripes: everything from the sender, in wants of at
	// most MaxWantChunks, at most blobPerSource outstanding.
	s = testSwarm(4*proto.MaxWantChunks, sender, nil, me)
	all := make([]int, 4*proto.MaxWantChunks)
	for i := range all {
		all[i] = i
	}
	for range 3 {
		for i, w := range s.wants(all, now) {
			if len(w) > proto.MaxWantChunks || i != s.sender {
				t.Fatalf("want of %d chunks to source %d", len(w), i)
			}
		}
	}
	if n := s.srcs[s.sender].inflight; n != blobPerSource {
		t.Fatalf("%d chunks outstanding at the sender, want %d", n, blobPerSource)
	}
}

// TestSwarmBusySenderExcusesOwners: while the sender answers "not yet"
// (it is busy), an owner's run of "not yet"s does not stall it: its
// stripe is not asked of the sender, which would only add to its load.
func TestSwarmBusySenderExcusesOwners(t *testing.T) {
	t.Parallel()
	sender, me := keyN(1), keyN(3)
	s := testSwarm(4, sender, []proto.PubKey{keyN(2), me}, me) // stripes: 0 keyN(2), 1 mine
	now := time.Now()
	all := []int{0, 1, 2, 3}
	s.wants(all, now) // 0, 2 of keyN(2); 1, 3 of the sender
	for _, c := range []uint32{0, 2} {
		s.f.noteNotYet(keyN(2), c)
	}
	for _, c := range []uint32{1, 3} {
		s.f.noteNotYet(sender, c)
	}
	s.settle(all, now)
	s.wants(all, now.Add(blobStallAfter-time.Second)) // asked again: the sender busy again
	for _, c := range []uint32{1, 3} {
		s.f.noteNotYet(sender, c)
	}
	for _, c := range []uint32{0, 2} {
		s.f.noteNotYet(keyN(2), c)
	}
	s.settle(all, now.Add(blobStallAfter-time.Second))
	later := now.Add(blobStallAfter + time.Second)
	got := s.wants(all, later)
	if w := got[s.index(keyN(2))]; len(w) != 2 {
		t.Fatalf("with the sender busy, the owner's stripe went to %v", got)
	}
	// Once the sender has not been busy for blobStallAfter, it is.
	s.f.noteNotYet(keyN(2), 0)
	s.f.noteNotYet(keyN(2), 2)
	s.settle(all, later)
	quiet := now.Add(2*blobStallAfter - time.Second/2)
	s.settle(all, quiet)
	got = s.wants(all, quiet)
	if w := got[s.sender]; len(w) != 2 || w[0] != 0 {
		t.Fatalf("with the sender idle, the stalled owner's stripe went to %v", got)
	}
}

// TestSwarmLostAnswer: a chunk whose answer never comes, from a source
// that keeps answering others, is asked again after blobChunkTimeout,
// without the source being passed over.
func TestSwarmLostAnswer(t *testing.T) {
	t.Parallel()
	sender := keyN(1)
	s := testSwarm(2, sender, nil, keyN(3))
	now := time.Now()
	all := []int{0, 1}
	s.wants(all, now)
	// Chunk 0 arrives; chunk 1's answer is lost, while the source keeps
	// answering (so it is not silent).
	at := now.Add(blobChunkTimeout + time.Second)
	s.srcs[s.sender].waiting = at
	s.settle([]int{1}, at)
	got := s.wants([]int{1}, at)
	if w := got[s.sender]; len(w) != 1 || w[0] != 1 {
		t.Fatalf("a chunk whose answer was lost was asked of %v", got)
	}
	if s.f.passedOver(sender) {
		t.Fatal("the source of a lost answer was passed over")
	}
	if n := s.srcs[s.sender].inflight; n != 1 {
		t.Fatalf("%d chunks outstanding, want 1", n)
	}
}

// TestSwarmWantsCoalesce: a source that owes chunks is not asked for each
// chunk that arrives in a want of its own, but once it has room for
// minWantChunks; one that owes nothing is asked whatever is left.
func TestSwarmWantsCoalesce(t *testing.T) {
	t.Parallel()
	sender := keyN(1)
	now := time.Now()
	s := testSwarm(100, sender, nil, keyN(2))
	missing := make([]int, 100)
	for i := range missing {
		missing[i] = i
	}
	for range 2 {
		if got := s.wants(missing, now)[s.sender]; len(got) != wantChunks {
			t.Fatalf("asked %d chunks, want %d", len(got), wantChunks)
		}
	}
	for n := 1; n <= minWantChunks; n++ { // chunks 0..n-1 arrive
		s.settle(missing[n:], now)
		got := s.wants(missing[n:], now)[s.sender]
		switch {
		case n < minWantChunks && len(got) != 0:
			t.Fatalf("with %d chunks of room, asked %v: want nothing yet", n, got)
		case n == minWantChunks && len(got) != minWantChunks:
			t.Fatalf("with %d chunks of room, asked %v: want %d", n, got, minWantChunks)
		}
	}
	rest := missing[blobPerSource+minWantChunks:]
	s.settle(rest[:1], now) // all arrived but the last chunk, never asked yet
	if got := s.wants(rest[:1], now)[s.sender]; len(got) != 1 {
		t.Fatalf("asked %v for the last chunk of a source that owes none", got)
	}
}
