package peers

import (
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

func pendingKnock(t *testing.T, remote string) *proto.HandshakePayload {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &proto.HandshakePayload{Identity: proto.PubKey(pub), Remote: remote}
}

// TestPendingBookLimits: one source holds at most its share; a full list
// refuses new keys rather than evicting, refreshes evict no one, and an
// entry no one refreshes for a day makes room.
func TestPendingBookLimits(t *testing.T) {
	b := NewPending()
	now := time.Unix(1_000_000, 0)
	first := pendingKnock(t, "192.0.2.1:4000")
	if why := b.Record(first, false, now); why != Listed {
		t.Fatalf("first knock: %q", why)
	}
	for i := range 20 {
		why := b.Record(pendingKnock(t, fmt.Sprintf("[2001:db8::%x]:5000", i+1)), false, now)
		if (i < maxPendingSource) != (why == Listed) {
			t.Fatalf("knock %d from one /64: %q", i, why)
		}
	}
	var keys []*proto.HandshakePayload
	for i := 0; len(b.List()) < maxPending; i++ {
		p := pendingKnock(t, fmt.Sprintf("198.51.100.%d:1", i))
		if b.Record(p, false, now) == Listed {
			keys = append(keys, p)
		}
	}
	for i := range 1000 {
		now = now.Add(100 * time.Millisecond)
		b.Record(keys[i%len(keys)], false, now) // refreshes
		if why := b.Record(pendingKnock(t, fmt.Sprintf("203.0.113.%d:1", i%250)), false, now); why != PendingFull {
			t.Fatalf("a new key on a full list: %q", why)
		}
	}
	if _, ok := b.byKey[first.Identity]; !ok || len(b.List()) != maxPending {
		t.Fatalf("after refreshes: first listed %v, %d entries", ok, len(b.List()))
	}
	// A day later, the first knock has expired (no one refreshed it).
	now = now.Add(pendingExpiry - 50*time.Second)
	late := pendingKnock(t, "192.0.2.9:1")
	if why := b.Record(late, false, now); why != Listed {
		t.Fatalf("a new key after an entry expired: %q", why)
	}
	if _, ok := b.byKey[first.Identity]; ok {
		t.Fatal("the unrefreshed entry was kept")
	}
}

func TestPendingSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:4000":           "192.0.2.1",
		"[::ffff:192.0.2.1]:1":     "192.0.2.1",
		"[2001:db8::1]:7437":       "2001:db8::/64",
		"[2001:db8::1:2:3:4]:7437": "2001:db8::/64",
		"[fe80::1%eth0]:1":         "fe80::/64",
		"@":                        "local",
		"":                         "local",
	} {
		if got := sourceOf(in); got != want {
			t.Errorf("sourceOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPendingRefreshNoEvict replays the refresh attack on the book with a
// simulated clock: a newcomer is listed, then 276 keys from many
// addresses arrive at 1.5 a second while the listed ones are refreshed
// at 11 a second. The newcomer, which does not knock again, stays listed.
func TestPendingRefreshNoEvict(t *testing.T) {
	b := NewPending()
	now := time.Unix(1_000_000, 0)
	newcomer := pendingKnock(t, "192.0.2.1:4000")
	b.Record(newcomer, false, now)
	var keys []*proto.HandshakePayload
	for i := range 600 { // 400 s of the attack
		now = now.Add(time.Second * 2 / 3)
		if i < 276 {
			p := pendingKnock(t, fmt.Sprintf("198.51.%d.%d:1", i/200, i%200))
			keys = append(keys, p)
			b.Record(p, false, now)
		}
		for j := range 7 { // 11 a second is about 7 per new key
			b.Record(keys[(i*7+j)%len(keys)], false, now)
		}
	}
	for _, e := range b.List() {
		if e.Key.Equal(newcomer.Identity) {
			return
		}
	}
	t.Fatalf("the refresh attack evicted the listed newcomer (%d listed)", len(b.List()))
}
