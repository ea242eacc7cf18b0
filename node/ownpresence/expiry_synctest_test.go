package ownpresence

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/internal/bubble"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
)

// expiryClock is a fakeHost that notes when each member was counted
// expired.
type expiryClock struct {
	*fakeHost
	mu      sync.Mutex
	expired []time.Time
}

func (h *expiryClock) Count(c Counter) {
	if c == Expired {
		h.mu.Lock()
		h.expired = append(h.expired, time.Now())
		h.mu.Unlock()
	}
	h.fakeHost.Count(c)
}

func (h *expiryClock) expiries() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.expired...)
}

func memberKey(t *testing.T) proto.PubKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return proto.PubKey(pub)
}

// TestSynctestPresenceExpiry: on synctest's clock, with the default
// presence_ttl (5 min), a member that goes silent after announcing
// itself online is shown offline once its silence is longer than the
// TTL, and counted expired (once) by the first expiry check after that:
// at 5 min + the check period (2 s), to the instant. A member that
// announced a longer TTL of its own (10 min) is expired by that one; a
// member heard from every minute never is.
func TestSynctestPresenceExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &expiryClock{fakeHost: newFakeHost(t)}
		cfg := Config{PresenceTTL: presence.DefaultTTL, PresenceAwayAfter: 24 * time.Hour,
			PresenceOfflineAfter: 48 * time.Hour, MaxTTL: 144 * time.Hour}
		table := presence.NewTable(cfg.PresenceTTL)
		a := New(h, cfg, table, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { a.Run(ctx) })
		defer wg.Wait()
		defer cancel()

		start := time.Now()
		silent, patient, chatty := memberKey(t), memberKey(t), memberKey(t)
		online := proto.Presence{State: proto.Online, Seq: 1}
		table.Observe(silent, online, start)
		table.ObserveTTL(patient, online, 10*time.Minute, start)
		table.Observe(chatty, online, start)
		check := min(cfg.PresenceTTL/4, 2*time.Second)

		for time.Since(start) < time.Hour {
			bubble.Advance(time.Minute) // a minute of the bubble's clock
			table.Touch(chatty, time.Now())
			synctest.Wait()
			if time.Since(start) == cfg.PresenceTTL {
				if e, _ := table.Get(silent, time.Now()); e.State != proto.Online {
					t.Fatalf("silent for exactly the TTL: shown %v, want online", e.State)
				}
			}
		}

		got := h.expiries()
		want := []time.Time{start.Add(cfg.PresenceTTL + check), start.Add(10*time.Minute + check)}
		if len(got) != len(want) {
			t.Fatalf("%d members counted expired in an hour, want %d: %v", len(got), len(want), got)
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Errorf("expiry %d after %v, want %v", i+1, got[i].Sub(start), want[i].Sub(start))
			}
		}
		now := time.Now()
		for k, st := range map[proto.PubKey]proto.PresenceState{silent: proto.Offline, patient: proto.Offline, chatty: proto.Online} {
			if e, _ := table.Get(k, now); e.State != st {
				t.Errorf("after an hour %s is shown %v, want %v", k.Fingerprint(), e.State, st)
			}
		}
	})
}
