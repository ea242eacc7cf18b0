package peers

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// TestServiceExchangeFrames: the service's own frames, as the node's
// dispatch hands them over: what does not parse is counted and changes
// nothing; a peer list's entries of members are taken into the address
// book (and wake the dialler), those of non-members are counted and
// left out, and the link's copy of the peer's list holds them all.
func TestServiceExchangeFrames(t *testing.T) {
	r := newServiceRig(t)
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.host.roster, err = roster.New("acme", priv, "self"); err != nil {
		t.Fatal(err)
	}
	r.host.setMember(r.peerPub, true)
	r.link(t)
	recv(t, r.host.ups, "link up")
	pl := r.linked()

	r.svc.HandlePeers(pl, []byte{0xff})
	r.svc.HandlePeerUpdate(pl, []byte{0xa1, 0x00})
	r.svc.HandleLinkMove(pl, []byte{0xa1, 0x00, 0x07})
	if c := r.host.counts[PeersMalformed].Load(); c != 2 {
		t.Fatalf("peers.malformed %d, want 2", c)
	}
	if c := r.host.counts[LinkMoveMalformed].Load(); c != 1 {
		t.Fatalf("link.move.malformed %d, want 1", c)
	}

	member, stranger := testKey(t), testKey(t)
	r.host.setMember(member, true)
	select { // drain a wake of the link's own
	case <-r.svc.kick:
	default:
	}
	b, err := proto.Marshal(&proto.PeerList{Peers: []proto.PeerInfo{
		{Key: member, Addrs: []string{tcpAddr(1)}},
		{Key: stranger, Addrs: []string{tcpAddr(2)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.svc.HandlePeers(pl, b)
	if c := r.host.counts[PeersIgnoredNotMember].Load(); c != 1 {
		t.Fatalf("peers.ignored.not_member %d, want 1", c)
	}
	r.svc.Lock()
	m, s := r.svc.ByKey[member], r.svc.ByKey[stranger]
	var src Source
	var ok bool
	if m != nil {
		src, ok = m.Addrs.SourceOf(mustAddr(t, tcpAddr(1)))
	}
	r.svc.Unlock()
	if !ok || src != Gossip || s != nil {
		t.Fatalf("member's address taken %v (source %v), stranger in the table %v", ok, src, s != nil)
	}
	select {
	case <-r.svc.kick:
	default:
		t.Fatal("a new address did not wake the dialler")
	}
	if keys, ok := pl.PX.ViewKeys(r.peerPub, time.Time{}, 10); !ok || len(keys) != 2 {
		t.Fatalf("the link's copy holds %d entries, want both", len(keys))
	}
}
