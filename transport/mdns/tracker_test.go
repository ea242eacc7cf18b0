package mdns

import (
	"testing"
)

func TestTrackerReportsChangesAndRefreshes(t *testing.T) {
	t.Parallel()
	tr := newTracker(3, 100)
	p := Peer{Key: testKey(1), Org: "acme", ProtoVersion: 1, Addrs: []string{"tcp://10.0.0.1:7000", "tcp://[2001:db8::1]:7000"}}

	// One step per query round.
	steps := []struct {
		name   string
		change func(*Peer)
		want   bool
	}{
		{"first sight", nil, true},
		{"unchanged", nil, false},
		{"same addresses, other order", func(p *Peer) { p.Addrs = []string{p.Addrs[1], p.Addrs[0]} }, false},
		{"unchanged for 3 rounds: refresh", nil, true},
		{"roster version", func(p *Peer) { p.RosterVersion = 2 }, true},
		{"unchanged again", nil, false},
		{"address set", func(p *Peer) { p.Addrs = []string{"tcp://10.0.0.9:7000"} }, true},
		{"seen time is not news", func(p *Peer) { p.Seen = p.Seen.Add(1) }, false},
	}
	for i, s := range steps {
		tr.nextRound()
		if s.change != nil {
			s.change(&p)
		}
		if got := tr.observe(p); got != s.want {
			t.Fatalf("step %d (%s): observe = %v, want %v", i, s.name, got, s.want)
		}
	}
}

func TestTrackerForgetsSilentPeers(t *testing.T) {
	t.Parallel()
	tr := newTracker(2, 100)
	p := Peer{Key: testKey(1), Addrs: []string{"tcp://10.0.0.1:7000"}}
	tr.nextRound()
	if !tr.observe(p) {
		t.Fatal("first sight not reported")
	}
	// Silent for longer than a refresh period: forgotten, and reported
	// at once when it is back.
	for range 3 {
		tr.nextRound()
	}
	if !tr.observe(p) {
		t.Fatal("returning peer not reported")
	}
	tr.forget(p.Key)
	if !tr.observe(p) {
		t.Fatal("forgotten peer not reported")
	}
}

func TestTrackerIsBounded(t *testing.T) {
	t.Parallel()
	tr := newTracker(1000, 4)
	tr.nextRound()
	for i := range 10 {
		tr.observe(Peer{Key: testKey(byte(i))})
		if len(tr.peers) > 4 {
			t.Fatalf("tracking %d peers, limit 4", len(tr.peers))
		}
	}
	// The latest is still known; the first was evicted.
	if tr.observe(Peer{Key: testKey(9)}) {
		t.Error("most recent peer was evicted")
	}
	if !tr.observe(Peer{Key: testKey(0)}) {
		t.Error("oldest peer was not evicted")
	}
}
