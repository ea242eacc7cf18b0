package peers

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestSlowPeersBackoff: each slow close doubles the window up to the
// cap, a held key is refused only inside it, and strikes are forgotten
// after SlowForget without a slow close.
func TestSlowPeersBackoff(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	k := proto.PubKey(pub)
	var s SlowPeers
	now := time.Unix(1_800_000_000, 0)
	if !s.HeldUntil(k, now).IsZero() {
		t.Fatal("a key never closed is held")
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		until := s.Strike(k, now)
		if got := until.Sub(now); got != w {
			t.Fatalf("strike %d: window %v, want %v", i+1, got, w)
		}
		if s.HeldUntil(k, now.Add(w-time.Millisecond)).IsZero() {
			t.Fatalf("strike %d: not held inside the window", i+1)
		}
		if !s.HeldUntil(k, now.Add(w)).IsZero() {
			t.Fatalf("strike %d: held after the window", i+1)
		}
		now = now.Add(w)
	}
	// Forgotten: the next strike starts from the first window again.
	now = now.Add(SlowForget + time.Second)
	if got := s.Strike(k, now).Sub(now); got != SlowBackoffMin {
		t.Fatalf("window after SlowForget = %v, want %v", got, SlowBackoffMin)
	}
}

// TestRefusedBackoff: 1 s doubling to 30 s, each lengthened by at most
// a quarter and never shortened.
func TestRefusedBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		for range 20 {
			if d := RefusedBackoff(i + 1); d < w || d > w+w/4 {
				t.Fatalf("refusal %d: %v outside [%v, %v]", i+1, d, w, w+w/4)
			}
		}
	}
}

// TestBackoff: doubling from lo to hi, drawn from the upper half.
func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, time.Second
	for fails, w := range []time.Duration{lo, 2 * lo, 4 * lo, 8 * lo, hi, hi} {
		for range 20 {
			if d := Backoff(lo, hi, fails); d < w/2 || d > w {
				t.Fatalf("fails %d: %v outside [%v, %v]", fails, d, w/2, w)
			}
		}
	}
}
