package cards

import (
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestCardPaceTakesTheSlotAtOnce: the interval starts when a card is let
// through, not when its durable write ends, so neither the next frame nor
// a pending card falling due meanwhile is let through in the same second.
func TestCardPaceTakesTheSlotAtOnce(t *testing.T) {
	b := newStore(t.TempDir())
	var k proto.PubKey
	k[0] = 1
	t0 := time.Now()
	if !b.pace(&proto.Card{Key: k, Version: 1}, nil, t0) {
		t.Fatal("the first card was held back")
	}
	// Card 1 is still being written (applied not yet called).
	if b.pace(&proto.Card{Key: k, Version: 2}, nil, t0.Add(10*time.Millisecond)) {
		t.Fatal("a second card was let through within the interval")
	}
	if out, _ := b.due(t0.Add(500 * time.Millisecond)); len(out) != 0 {
		t.Fatalf("%d cards taken before the interval passed", len(out))
	}
	// A direct card at the second takes the slot; the pending one waits
	// for the next.
	if !b.pace(&proto.Card{Key: k, Version: 3}, nil, t0.Add(Interval)) {
		t.Fatal("a card after the interval was held back")
	}
	if out, next := b.due(t0.Add(Interval)); len(out) != 0 || next.IsZero() && len(b.pending) > 0 {
		t.Fatalf("pending taken in the slot a direct card took: %d, next %v", len(out), next)
	}
}
