package peers

import (
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// Peers that stop reading.
//
// A link's send queue is bounded in bytes and frames (transport
// Config.SendQueueBytes and SendQueue), and a write blocked for the idle
// timeout closes the link with transport.ErrSlowReader. Such a peer
// would reconnect at once and fill a fresh queue, so its key is held in
// a backoff: links from it (inbound or dialled) are refused with a
// goodbye until the window ends, and we do not dial it before then.
// Each further slow close doubles the window, from SlowBackoffMin up to
// slowBackoffMax; a key with no slow close for SlowForget is forgotten.

const (
	// SlowBackoffMin is the first window: long enough that a peer that
	// does not read spends most of its time refused, short enough that a
	// peer that was merely stalled (a paused VM) is back soon.
	SlowBackoffMin = 15 * time.Second
	// slowBackoffMax caps the window.
	slowBackoffMax = 5 * time.Minute
	// SlowForget is how long a key's strikes are kept after its last
	// slow close.
	SlowForget = 30 * time.Minute
	// maxSlowPeers bounds the table; members only get in, so it is
	// reached only by a roster of that many slow members.
	maxSlowPeers = 4096
)

// SlowPeers holds the keys closed for not reading. The zero value is
// empty and ready; it is safe for concurrent use.
type SlowPeers struct {
	mu sync.Mutex
	m  map[proto.PubKey]*slowPeer // guarded by mu
}

type slowPeer struct {
	strikes int
	until   time.Time // links are refused before this
	last    time.Time // the last slow close
}

// slowWindow returns the backoff after the given number of slow closes.
func slowWindow(strikes int) time.Duration {
	d := SlowBackoffMin
	for i := 1; i < strikes && d < slowBackoffMax; i++ {
		d *= 2
	}
	return min(d, slowBackoffMax)
}

// Strike records a slow close of k at now and returns when its window
// ends.
func (s *SlowPeers) Strike(k proto.PubKey, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[proto.PubKey]*slowPeer{}
	}
	for key, p := range s.m {
		if now.Sub(p.last) > SlowForget {
			delete(s.m, key)
		}
	}
	p := s.m[k]
	if p == nil {
		if len(s.m) >= maxSlowPeers {
			return now // no room: the link is closed, but not held back
		}
		p = &slowPeer{}
		s.m[k] = p
	}
	p.strikes++
	p.last = now
	p.until = now.Add(slowWindow(p.strikes))
	return p.until
}

// HeldUntil returns when k's backoff ends; zero if it is not held.
func (s *SlowPeers) HeldUntil(k proto.PubKey, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[k]; p != nil && now.Before(p.until) {
		return p.until
	}
	return time.Time{}
}
