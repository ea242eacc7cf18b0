package mdns

import (
	"slices"
	"strconv"
	"strings"

	"github.com/meshd/meshd/proto"
)

// tracker decides which answers are worth reporting. It counts queries in
// rounds and remembers, per peer, what was last reported and when the peer
// was last seen. It is owned by one goroutine.
type tracker struct {
	refresh uint64 // report an unchanged peer again after this many rounds
	max     int    // peers remembered at most
	round   uint64
	peers   map[proto.PubKey]*trackedPeer
}

type trackedPeer struct {
	state    string // what a change of means a new report
	reported uint64 // round of the last report
	seen     uint64 // round the peer last answered in
}

func newTracker(refresh uint64, max int) *tracker {
	return &tracker{refresh: refresh, max: max, peers: map[proto.PubKey]*trackedPeer{}}
}

// nextRound starts a query round and forgets peers that have been silent
// for a whole refresh period, so that they are reported at once if they
// come back.
func (t *tracker) nextRound() {
	t.round++
	for k, p := range t.peers {
		if t.round-p.seen > t.refresh {
			delete(t.peers, k)
		}
	}
}

// observe records an answer from p and reports whether to pass it on: when
// p is new, when it changed, or when its last report is a refresh period
// old.
func (t *tracker) observe(p Peer) bool {
	state := peerState(p)
	tp, ok := t.peers[p.Key]
	if !ok {
		if len(t.peers) >= t.max {
			t.evictOldest()
		}
		t.peers[p.Key] = &trackedPeer{state: state, reported: t.round, seen: t.round}
		return true
	}
	tp.seen = t.round
	if tp.state != state || t.round-tp.reported >= t.refresh {
		tp.state, tp.reported = state, t.round
		return true
	}
	return false
}

// forget drops what is known of k, so that its next answer is reported.
func (t *tracker) forget(k proto.PubKey) { delete(t.peers, k) }

func (t *tracker) evictOldest() {
	var oldest proto.PubKey
	var found bool
	var seen uint64
	for k, p := range t.peers {
		if !found || p.seen < seen {
			oldest, seen, found = k, p.seen, true
		}
	}
	delete(t.peers, oldest)
}

// peerState is the part of a report whose change is news. The address
// order is the library's, so it is sorted first.
func peerState(p Peer) string {
	addrs := slices.Sorted(slices.Values(p.Addrs))
	return strings.Join([]string{
		strings.Join(addrs, ","), p.Host, p.Org,
		strconv.FormatUint(p.RosterVersion, 10), strconv.Itoa(p.ProtoVersion),
	}, "|")
}
