package peers

import (
	"testing"

	"github.com/meshd/meshd/proto"
)

// TestPeerListDeltas: a link gets the whole list without its peer's own
// entry, then only what changed (sets and removals), and the digest it
// is sent is the XOR of the entries it holds.
func TestPeerListDeltas(t *testing.T) {
	l := NewPeerList()
	self, a, b := testKey(t), testKey(t), testKey(t)
	l.Refresh(map[proto.PubKey][]string{self: {tcpAddr(1)}, a: {tcpAddr(2)}})
	pl := &Link{Key: a}
	if !l.NeedsWhole(pl) {
		t.Fatal("a new link does not need the whole list")
	}
	whole, ok := l.WholeFor(pl)
	if !ok || len(whole.Peers) != 1 || !whole.Peers[0].Key.Equal(self) || l.NeedsWhole(pl) {
		t.Fatalf("whole list %v %v", whole.Peers, ok)
	}
	if _, ok := l.UpdateFor(pl, false, false); ok {
		t.Fatal("an update with nothing changed")
	}
	l.Refresh(map[proto.PubKey][]string{a: {tcpAddr(2)}, b: {tcpAddr(3)}})
	u, ok := l.UpdateFor(pl, false, false)
	if !ok || len(u.Set) != 1 || !u.Set[0].Key.Equal(b) || len(u.Removed) != 1 || !u.Removed[0].Equal(self) {
		t.Fatalf("update %+v %v", u, ok)
	}
	var want [proto.PeerDigestSize]byte
	proto.XorDigest(&want, proto.PeerEntryHash(proto.PeerInfo{Key: b, Addrs: []string{tcpAddr(3)}}))
	if [proto.PeerDigestSize]byte(u.Digest) != want {
		t.Fatal("the digest is not that of the entries the peer holds")
	}
	if got := GossipAddrs([]string{"unix:///x", tcpAddr(1)}); len(got) != 1 || got[0] != tcpAddr(1) {
		t.Fatalf("gossip addrs %v", got)
	}
}

// TestPeerViewDigestAsReceived pins what a receiver's copy of a peer's
// list holds for the digest (PROTOCOL.md §14.4): every entry as it
// arrived, including a third party's unix:// address it will not dial, a
// key that is not a member, its own key and an entry with no addresses.
// Past the cap, entries with new keys are not kept, and the digest no
// longer matches.
func TestPeerViewDigestAsReceived(t *testing.T) {
	key := func(b byte) proto.PubKey {
		var k proto.PubKey
		for i := range k {
			k[i] = b
		}
		return k
	}
	list := []proto.PeerInfo{
		{Key: key(1), Addrs: []string{"tcp://192.0.2.1:7946", "unix:///run/meshd/link.sock"}}, // a third party's socket
		{Key: key(2), Addrs: []string{"tcp://192.0.2.2:7946"}},                                // not a member
		{Key: key(3), Addrs: []string{"tcp://192.0.2.3:7946"}},                                // the receiver itself
		{Key: key(4), Addrs: []string{}},                                                      // no addresses
	}
	hash := func(p proto.PeerInfo, _ int) [proto.PeerDigestSize]byte { return proto.PeerEntryHash(p) }
	var x Exchange
	for _, p := range list {
		x.ViewSet(p, hash, MinPeerView)
	}
	if x.ViewDigest != proto.PeerDigest(list) {
		t.Fatal("the copy's digest is not the digest of the entries as received")
	}
	var capped Exchange
	for _, p := range list {
		capped.ViewSet(p, hash, 3)
	}
	if len(capped.View) != 3 || capped.View[key(4)] != ([proto.PeerDigestSize]byte{}) || capped.ViewDigest != proto.PeerDigest(list[:3]) {
		t.Fatalf("past the cap: %d entries kept, want the first 3", len(capped.View))
	}
	capped.ViewSet(proto.PeerInfo{Key: key(1), Addrs: []string{"tcp://192.0.2.9:7946"}}, hash, 3)
	if capped.View[key(1)] != proto.PeerEntryHash(proto.PeerInfo{Key: key(1), Addrs: []string{"tcp://192.0.2.9:7946"}}) {
		t.Fatal("a kept entry is not replaced at the cap")
	}
}
