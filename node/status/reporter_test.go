package status

import (
	"testing"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// TestLinkReportCapped: a peer list cannot make a node report more than
// maxLinkReport keys for one neighbour.
func TestLinkReportCapped(t *testing.T) {
	var x peers.Exchange
	for i := range maxLinkReport + 10 {
		p := proto.PeerInfo{Key: proto.PubKey{byte(i), byte(i >> 8), 1}}
		x.ViewSet(p, func(p proto.PeerInfo, _ int) [proto.PeerDigestSize]byte { return proto.PeerEntryHash(p) }, 1<<20)
	}
	x.ViewAt = time.Now()
	keys, ok := x.ViewKeys(proto.PubKey{9}, time.Time{}, maxLinkReport)
	if !ok || len(keys) != maxLinkReport {
		t.Fatalf("reported %d keys (%v), want %d", len(keys), ok, maxLinkReport)
	}
	if _, ok := x.ViewKeys(proto.PubKey{9}, time.Now().Add(time.Second), maxLinkReport); ok {
		t.Fatal("a copy older than notBefore is reported")
	}
}
