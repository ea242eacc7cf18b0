package claims

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// TestClaimBookMemory measures the claims full: maxClaims claims (the
// most meshd holds; more are refused with 503) and reports the bytes per
// claim, the figure in docs/SECURITY.md. Leases that end free their
// claims at the next look.
func TestClaimBookMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := New(nil, nil, Config{}, nil, nil)
	until := time.Now().Add(time.Hour)
	var from proto.PubKey
	for i := range maxClaims {
		from[0], from[1], from[2] = byte(i), byte(i>>8), byte(i>>16)
		b.m[Key{from, uuid.New()}] = claim{worker: "worker-1", until: until}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / maxClaims
	t.Logf("%d claims: %.1f MiB, %.0f bytes a claim", maxClaims, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), per)
	if per > 400 {
		t.Fatalf("%.0f bytes a claim", per)
	}
	runtime.KeepAlive(b)

	// An ended lease is not held, and is dropped when looked at.
	k := Key{from, uuid.New()}
	b.m[k] = claim{worker: "w", until: time.Now().Add(-time.Second)}
	if _, held := b.heldLocked(k, "x", time.Now()); held {
		t.Fatal("an ended lease still holds its item")
	}
	if _, ok := b.m[k]; ok {
		t.Fatal("an ended lease was kept")
	}
	// The worker that holds a claim is not refused by it; another is.
	k2 := Key{from, uuid.New()}
	b.m[k2] = claim{worker: "w", until: until}
	if _, held := b.heldLocked(k2, "w", time.Now()); held {
		t.Fatal("a worker is refused its own claim")
	}
	if _, held := b.heldLocked(k2, "", time.Now()); !held {
		t.Fatal("an anonymous claimant took a held item")
	}
}

// TestClaimWaitStateDropsEnded: a lease that ended is dropped by the
// waiters' look at the claims, so a waiter whose filter never meets that
// item is not woken for it again and again (the next wake is the
// earliest lease still running).
func TestClaimWaitStateDropsEnded(t *testing.T) {
	b := New(nil, nil, Config{}, nil, nil)
	var from proto.PubKey
	now := time.Now()
	b.m[Key{from, uuid.New()}] = claim{until: now.Add(-time.Minute)}
	live := now.Add(time.Hour)
	b.m[Key{from, uuid.New()}] = claim{until: live}
	_, first := b.waitState()
	if !first.Equal(live) || len(b.m) != 1 {
		t.Fatalf("first wake %v with %d claims, want %v with 1", first, len(b.m), live)
	}
}

// TestCheckWorker: a worker name is at most 64 bytes of printable text.
func TestCheckWorker(t *testing.T) {
	for _, w := range []string{"", "w1", "pool-a/worker 7", strings.Repeat("x", maxWorkerName)} {
		if err := checkWorker(w); err != nil {
			t.Errorf("%q refused: %v", w, err)
		}
	}
	for _, w := range []string{strings.Repeat("x", maxWorkerName+1), "w\n1", "\x1b[31mred"} {
		if err := checkWorker(w); err == nil || !strings.Contains(err.Error(), "printable") {
			t.Errorf("%q: %v", w, err)
		}
	}
}
