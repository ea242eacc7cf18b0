package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{16 << 20, 0, 400},        // nothing measured: the least goal is the floor
		{16 << 20, 1 << 10, 400},  // tiny: the same
		{16 << 20, 3 << 20, 400},  // 4 MiB × 4 = 16 MiB, and 3 + 3 × 4 = 15
		{16 << 20, 4 << 20, 300},  // 4 + 4 × 3 = 16
		{16 << 20, 6 << 20, 166},  // 6 + 6 × 1.66 = 16
		{16 << 20, 8 << 20, 100},  // half the floor: the default's goal is the floor
		{16 << 20, 64 << 20, 100}, // above it, the default
		{64 << 20, 3 << 20, 1600}, // a floor of 64 MiB
	} {
		if got := percentFor(c.floor, c.live); got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.floor, c.live, got, c.want)
		}
	}
}

// gogc reads the GOGC in force.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink []byte

// busyFloor allocates fast until f holds GOGC raised.
func busyFloor(t *testing.T, f *Floor) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for range 256 {
			sink = make([]byte, 64<<10)
		}
		if p, busy, _ := f.state(); busy && p > 100 {
			return
		}
		if time.Now().After(deadline) {
			p, busy, n := f.state()
			t.Fatalf("GOGC %d, busy %v after %d collections of fast allocation", p, busy, n)
		}
	}
}

// TestFloorFollowsAllocation: a process allocating fast gets GOGC raised
// to reach the floor, and is collected less often than at the default;
// once it allocates slowly GOGC is 100 again.
func TestFloorFollowsAllocation(t *testing.T) {
	f := Start(DefaultBytes)
	defer f.Stop()
	if p, busy, _ := f.state(); p != 100 || busy || gogc() != 100 {
		t.Fatalf("at start: GOGC %d (runtime %d), busy %v; want 100, not busy", p, gogc(), busy)
	}

	// Fast: 64 KiB at a time, each dropped, far above busyRate.
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcs0 := ms.NumGC
	busyFloor(t, f)
	if g := gogc(); g <= 100 {
		t.Fatalf("the floor says busy but the runtime's GOGC is %d", g)
	}
	// At the raised GOGC a collection comes after more than the
	// default's 4 MiB of a small heap.
	runtime.ReadMemStats(&ms)
	gcs1, alloc1 := ms.NumGC, ms.TotalAlloc
	for range 1024 { // 64 MiB
		sink = make([]byte, 64<<10)
	}
	runtime.ReadMemStats(&ms)
	if n := ms.NumGC - gcs1; n == 0 || (ms.TotalAlloc-alloc1)/uint64(n) < 6<<20 {
		t.Fatalf("%d collections in %d MiB allocated with the floor held (%d before)", n, (ms.TotalAlloc-alloc1)>>20, gcs1-gcs0)
	}

	// Slow: a collection ends the fast spell, then next to nothing is
	// allocated for a while before the next.
	// (A cleanup of an earlier collection may be the one collect sees,
	// so the next quiet collection is the one that tells.)
	sink = nil
	collect(t, f)
	for i := 0; ; i++ {
		time.Sleep(300 * time.Millisecond) // deliberate: the rate is bytes over time
		collect(t, f)
		p, busy, _ := f.state()
		if !busy && p == 100 && gogc() == 100 {
			break
		}
		if i == 3 {
			t.Fatalf("after quiet spells: GOGC %d (runtime %d), busy %v; want 100, not busy", p, gogc(), busy)
		}
	}
}

// collect runs a collection and waits until the floor has seen it.
func collect(t *testing.T, f *Floor) {
	t.Helper()
	_, _, n := f.state()
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, m := f.state(); m > n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the floor saw no collection within 10 s of runtime.GC")
		}
		time.Sleep(time.Millisecond) // the cleanup runs on a goroutine of the runtime's
	}
}

// TestStopRestoresDefault: a floor stopped while it held GOGC raised
// puts the default back, and sees no more collections.
func TestStopRestoresDefault(t *testing.T) {
	f := Start(DefaultBytes)
	busyFloor(t, f)
	f.Stop()
	f.Stop()
	if g := gogc(); g != 100 {
		t.Fatalf("GOGC %d after Stop, want 100", g)
	}
	_, _, n := f.state()
	for range 512 {
		sink = make([]byte, 64<<10)
	}
	runtime.GC()
	if p, _, m := f.state(); p != 100 || m != n {
		t.Fatalf("after Stop: GOGC %d, collections seen %d then %d", p, n, m)
	}
}

// TestFloorEndsWithoutCollections: a process that stops allocating while
// the floor holds gets the default back after quietAfter, with no
// collection of its own to tell it.
func TestFloorEndsWithoutCollections(t *testing.T) {
	f := Start(DefaultBytes)
	defer f.Stop()
	f.mu.Lock()
	f.quietAfter = 200 * time.Millisecond
	f.mu.Unlock()
	busyFloor(t, f)
	sink = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, busy, _ := f.state(); !busy && p == 100 && gogc() == 100 {
			return
		}
		if time.Now().After(deadline) {
			p, busy, n := f.state()
			t.Fatalf("10 s after the allocation stopped: GOGC %d (runtime %d), busy %v, %d collections seen", p, gogc(), busy, n)
		}
		time.Sleep(10 * time.Millisecond) // the timer runs on its own
	}
}
