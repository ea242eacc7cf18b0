package node

import (
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// TestMaxTTLIsDedupeHorizon: the ttl limit must not outlive the store's
// dedupe entries, and this node's own envelopes must pass it.
func TestMaxTTLIsDedupeHorizon(t *testing.T) {
	if h := history.DefaultConfig().SeenMaxAge; time.Duration(maxTTL)*time.Second != h {
		t.Fatalf("maxTTL %d s, dedupe horizon %v", maxTTL, h)
	}
	d := DefaultConfig()
	for _, ttl := range []time.Duration{d.EnvelopeTTL, d.OfflineWindow} {
		if !ttlWithinHorizon(&proto.SignedEnvelope{Envelope: proto.Envelope{TTL: uint32(ttl / time.Second)}}) {
			t.Fatalf("this node signs a ttl of %v, beyond the horizon", ttl)
		}
	}
	for ttl, want := range map[uint32]bool{1: true, maxTTL: true, maxTTL + 1: false, 1<<32 - 1: false} {
		if got := ttlWithinHorizon(&proto.SignedEnvelope{Envelope: proto.Envelope{TTL: ttl}}); got != want {
			t.Errorf("ttl %d: within %v, want %v", ttl, got, want)
		}
	}
}
