package transport

import (
	"runtime"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

// TestIdleLinkMemory checks what an idle link costs: after frames large
// enough to borrow every buffer have crossed each link both ways, the
// links hold their pooled buffers no longer, and each end of a link costs
// at most 32 KiB of heap and stack (its goroutines, its counters, its
// small read buffer, its cipher states).
func TestIdleLinkMemory(t *testing.T) {
	const pairs = 100
	const limit = 32 << 10
	cfgA, cfgB := testConfig(t, "org"), testConfig(t, "org")
	ln := listen(t, "tcp", cfgB)
	settle := func() uint64 {
		var ms runtime.MemStats
		for range 3 { // twice to empty the pools (and their victim caches)
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc + ms.StackInuse
	}
	base := settle()
	big := randomFrame(t, 100<<10) // chunked: borrows read and batch buffers
	small := randomFrame(t, 100)
	var links []*Link
	var cols []*collector
	for range pairs {
		out, in := pair(t, ln, cfgA, nil)
		co, ci := newCollector(4), newCollector(4)
		out.Start(co.handle)
		in.Start(ci.handle)
		links = append(links, out, in)
		cols = append(cols, co, ci)
	}
	for _, l := range links {
		if err := l.Send(big); err != nil {
			t.Fatal(err)
		}
		if err := l.Send(small); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cols {
		if got := c.next(t); len(got) != len(big) {
			t.Fatalf("got a %d-byte frame, want %d", len(got), len(big))
		}
		if got := c.next(t); len(got) != len(small) {
			t.Fatalf("got a %d-byte frame, want %d", len(got), len(small))
		}
	}
	// A writer gives its buffer back once its write returned, which may
	// be just after the frames arrived: measure until the figure is
	// within the limit or a few seconds have passed.
	var per int64
	testwait.Until(5*time.Second, func() bool {
		per = (int64(settle()) - int64(base)) / int64(len(links))
		return per <= limit
	})
	t.Logf("%d idle link ends: %d bytes of heap and stack each", len(links), per)
	if per > limit {
		t.Errorf("an idle link end costs %d bytes, limit %d", per, limit)
	}
	runtime.KeepAlive(cols)
}
