package peers

import (
	"sync"
	"testing"
)

// TestIsLocalHostPortConcurrent: links come up on several goroutines at
// once, each asking whether its peer is on this host; the cached list of
// this host's addresses is shared by them (run with -race).
func TestIsLocalHostPortConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { IsLocalHostPort("192.0.2.1:7946") })
	}
	wg.Wait()
}
