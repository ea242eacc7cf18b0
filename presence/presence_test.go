package presence

import (
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

func key(b byte) proto.PubKey { var k proto.PubKey; k[0] = b; return k }

func TestHighestSeqWins(t *testing.T) {
	tb := NewTable(time.Minute)
	t0 := time.Unix(1000, 0)
	a := key(1)
	if !tb.Observe(a, proto.Presence{State: proto.Online, Seq: 5}, t0) {
		t.Fatal("first announcement should change state")
	}
	// An older seq arriving later (reordered gossip) must not win.
	if tb.Observe(a, proto.Presence{State: proto.Away, Seq: 4}, t0.Add(time.Second)) {
		t.Fatal("older seq changed state")
	}
	if e, _ := tb.Get(a, t0.Add(time.Second)); e.State != proto.Online || e.Seq != 5 {
		t.Fatalf("got %+v, want online seq 5", e)
	}
	// Equal seq is not newer either.
	tb.Observe(a, proto.Presence{State: proto.Offline, Seq: 5}, t0.Add(2*time.Second))
	if e, _ := tb.Get(a, t0.Add(2*time.Second)); e.State != proto.Online {
		t.Fatalf("equal seq replaced state: %+v", e)
	}
	if !tb.Observe(a, proto.Presence{State: proto.Away, Seq: 6}, t0.Add(3*time.Second)) {
		t.Fatal("newer seq did not change state")
	}
}

func TestTTLExpiry(t *testing.T) {
	tb := NewTable(10 * time.Second)
	t0 := time.Unix(1000, 0)
	a, b := key(1), key(2)
	tb.Observe(a, proto.Presence{State: proto.Online, Seq: 1}, t0)
	tb.Observe(b, proto.Presence{State: proto.Online, Seq: 1}, t0)
	tb.Touch(b, t0.Add(8*time.Second))
	if got := tb.Expire(t0.Add(9 * time.Second)); len(got) != 0 {
		t.Fatalf("expired too early: %v", got)
	}
	got := tb.Expire(t0.Add(11 * time.Second))
	if len(got) != 1 || got[0] != a {
		t.Fatalf("expired %v, want only a", got)
	}
	if e, _ := tb.Get(a, t0.Add(11*time.Second)); e.State != proto.Offline || e.Announced != proto.Online {
		t.Fatalf("a = %+v, want offline (announced online)", e)
	}
	if e, _ := tb.Get(b, t0.Add(11*time.Second)); e.State != proto.Online {
		t.Fatalf("b = %+v, want online", e)
	}
	// Reported once only.
	if got := tb.Expire(t0.Add(12 * time.Second)); len(got) != 0 {
		t.Fatalf("expired twice: %v", got)
	}
	// A sign of life brings it back.
	tb.Touch(a, t0.Add(13*time.Second))
	if e, _ := tb.Get(a, t0.Add(13*time.Second)); e.State != proto.Online {
		t.Fatalf("a after touch = %+v", e)
	}
}

func TestPublisherMonotonicAcrossRestart(t *testing.T) {
	now := time.Unix(2000, 0)
	p := NewPublisher(0)
	a := p.Next(proto.Online, now)
	b := p.Next(proto.Away, now) // same instant: still increases
	if b.Seq <= a.Seq {
		t.Fatalf("seq did not increase: %d then %d", a.Seq, b.Seq)
	}
	// A restart that lost its counter, a second later, still outranks.
	p2 := NewPublisher(0)
	c := p2.Next(proto.Online, now.Add(time.Second))
	if c.Seq <= b.Seq {
		t.Fatalf("restarted seq %d does not outrank %d", c.Seq, b.Seq)
	}
}

// TestSenderTTL: a member that announced a longer TTL than the table's
// stays online through a silence the table's own TTL would expire, and
// goes offline after its own; a shorter announced TTL changes nothing.
func TestSenderTTL(t *testing.T) {
	tb := NewTable(3 * time.Second)
	t0 := time.Unix(1000, 0)
	slow, fast, old := key(1), key(2), key(3)
	tb.ObserveTTL(slow, proto.Presence{State: proto.Online, Seq: 1}, 30*time.Second, t0)
	tb.ObserveTTL(fast, proto.Presence{State: proto.Online, Seq: 1}, time.Second, t0)
	tb.Observe(old, proto.Presence{State: proto.Online, Seq: 1}, t0)
	if e, _ := tb.Get(fast, t0.Add(2*time.Second)); e.State != proto.Online || e.TTL != 3*time.Second {
		t.Fatalf("fast at +2s: %+v, want online with the table's 3s", e)
	}
	at := t0.Add(10 * time.Second)
	if got := tb.Expire(at); len(got) != 2 {
		t.Fatalf("expired %v at +10s, want fast and old", got)
	}
	if e, _ := tb.Get(slow, at); e.State != proto.Online || e.TTL != 30*time.Second {
		t.Fatalf("slow at +10s: %+v, want online with a 30s ttl", e)
	}
	if got := tb.Expire(t0.Add(31 * time.Second)); len(got) != 1 || got[0] != slow {
		t.Fatalf("expired %v at +31s, want slow", got)
	}
	// An older seq does not change the TTL in force.
	tb.ObserveTTL(slow, proto.Presence{State: proto.Online, Seq: 2}, 30*time.Second, t0.Add(40*time.Second))
	tb.ObserveTTL(slow, proto.Presence{State: proto.Online, Seq: 1}, time.Second, t0.Add(41*time.Second))
	if e, _ := tb.Get(slow, t0.Add(60*time.Second)); e.State != proto.Online {
		t.Fatalf("slow after a stale announcement: %+v", e)
	}
}
