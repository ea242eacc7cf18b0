package syncer

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestSyncCandidateOrder pins the order of PROTOCOL.md §17.2: recent
// writers (latest first), then archives, then admins, then the others by
// link age, then by key.
func TestSyncCandidateOrder(t *testing.T) {
	now := time.Now()
	key := func(b byte) proto.PubKey { var k proto.PubKey; k[0] = b; return k }
	cs := []syncCandidate{
		{key: key(1), linked: now.Add(-time.Hour)},                               // other, linked longest
		{key: key(2), admin: true, linked: now},                                  // admin
		{key: key(3), archive: true, linked: now},                                // archive
		{key: key(4), active: now.Add(-time.Minute), linked: now},                // wrote a minute ago
		{key: key(5), active: now.Add(-time.Second), archive: true, linked: now}, // wrote a second ago (an archive too)
		{key: key(6), linked: now},                                               // other
		{key: key(7), admin: true, archive: true, linked: now.Add(time.Second)},  // archive and admin, linked later
		{key: key(0), linked: now},                                               // other, lower key
	}
	orderCandidates(cs)
	var got []byte
	for _, c := range cs {
		got = append(got, c.key[0])
	}
	if want := []byte{5, 4, 3, 7, 2, 1, 0, 6}; !bytes.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
