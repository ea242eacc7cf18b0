package node

import (
	"testing"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
)

// TestMaxTTLIsDedupeHorizon: the ttl limit must not outlive the store's
// dedupe entries, and this node's own envelopes must pass it.
func TestMaxTTLIsDedupeHorizon(t *testing.T) {
	t.Parallel()
	if h := history.DefaultConfig().SeenMaxAge; time.Duration(rx.MaxTTL)*time.Second != h {
		t.Fatalf("rx.MaxTTL %d s, dedupe horizon %v", rx.MaxTTL, h)
	}
	d := DefaultConfig()
	for _, ttl := range []time.Duration{d.EnvelopeTTL, d.OfflineWindow} {
		if !rx.TTLWithinHorizon(&proto.SignedEnvelope{Envelope: proto.Envelope{TTL: uint32(ttl / time.Second)}}) {
			t.Fatalf("this node signs a ttl of %v, beyond the horizon", ttl)
		}
	}
	for ttl, want := range map[uint32]bool{1: true, rx.MaxTTL: true, rx.MaxTTL + 1: false, 1<<32 - 1: false} {
		if got := rx.TTLWithinHorizon(&proto.SignedEnvelope{Envelope: proto.Envelope{TTL: ttl}}); got != want {
			t.Errorf("ttl %d: within %v, want %v", ttl, got, want)
		}
	}
}
