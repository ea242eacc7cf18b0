package node

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestSlowPeersBackoff: each slow close doubles the window up to the
// cap, a held key is refused only inside it, and strikes are forgotten
// after slowForget without a slow close.
func TestSlowPeersBackoff(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	k := proto.PubKey(pub)
	var s slowPeers
	now := time.Unix(1_800_000_000, 0)
	if !s.heldUntil(k, now).IsZero() {
		t.Fatal("a key never closed is held")
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		until := s.strike(k, now)
		if got := until.Sub(now); got != w {
			t.Fatalf("strike %d: window %v, want %v", i+1, got, w)
		}
		if s.heldUntil(k, now.Add(w-time.Millisecond)).IsZero() {
			t.Fatalf("strike %d: not held inside the window", i+1)
		}
		if !s.heldUntil(k, now.Add(w)).IsZero() {
			t.Fatalf("strike %d: held after the window", i+1)
		}
		now = now.Add(w)
	}
	// Forgotten: the next strike starts from the first window again.
	now = now.Add(slowForget + time.Second)
	if got := s.strike(k, now).Sub(now); got != slowBackoffMin {
		t.Fatalf("window after slowForget = %v, want %v", got, slowBackoffMin)
	}
}
