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
