package node

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/node/control"
	"github.com/meshd/meshd/node/syncer"
)

// roundLogs holds, per node a test started, the catch-up rounds it
// finished (*Node → *roundLog), for roundsOf.
var roundLogs sync.Map

// roundLog records finished catch-up rounds, oldest first.
type roundLog struct {
	mu     sync.Mutex
	rounds []syncer.Round
}

func (l *roundLog) add(r syncer.Round) {
	l.mu.Lock()
	l.rounds = append(l.rounds, r)
	l.mu.Unlock()
}

// roundsOf returns the finished catch-up rounds of channel ch on n, a
// node started by newTestNode, oldest first.
func roundsOf(n *Node, ch uuid.UUID) []syncer.Round {
	v, ok := roundLogs.Load(n)
	if !ok {
		return nil
	}
	l := v.(*roundLog)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []syncer.Round
	for _, r := range l.rounds {
		if r.Channel == ch {
			out = append(out, r)
		}
	}
	return out
}

// roundAfter waits (up to within) for the first round of channel ch on n
// that started after t0, and returns it.
func roundAfter(t testing.TB, n *Node, ch uuid.UUID, t0 time.Time, within time.Duration) syncer.Round {
	t.Helper()
	var r syncer.Round
	waitFor(t, within, "a round started after "+t0.Format(time.StampMilli), func() bool {
		for _, x := range roundsOf(n, ch) {
			if x.Started.After(t0) {
				r = x
				return true
			}
		}
		return false
	})
	return r
}

// newTestNode starts a node with the seams h (nil: none), serves its
// control socket and records its catch-up rounds for roundsOf; the
// test's cleanup closes both.
func newTestNode(t testing.TB, cfg Config, h *testHooks) (*Node, error) {
	if h == nil {
		h = &testHooks{}
	}
	l := &roundLog{}
	h.syncRound = l.add
	n, err := newNode(cfg, h)
	if err != nil {
		return nil, err
	}
	// The control socket, served as meshd serves it.
	ctl, err := control.Serve(n.ControlSocket(), n.Backend(), n.log.With("component", "control"))
	if err != nil {
		n.Close()
		return nil, err
	}
	roundLogs.Store(n, l)
	t.Cleanup(func() {
		ctl.Close()
		n.Close()
		roundLogs.Delete(n)
	})
	return n, nil
}
