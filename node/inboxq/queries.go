package inboxq

import (
	"log/slog"
	"sync"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/claims"
)

// Queries answers the read side of the inbox and the history store.
// Create it with [New].
type Queries struct {
	host  Host
	store *history.Store
	cfg   Config
	log   *slog.Logger
	done  <-chan struct{} // closed when the node shuts down: waits end

	wake    *notifier
	events  *broadcaster
	counter *history.SendCounter

	// Claims are the workers' claims on the inbox's items: they take
	// items under the inbox's read state and wait on its wake-ups.
	Claims *claims.Leases
}

// New returns the queries over store (and the send counter, for
// [Queries.Sequence]), with the claims on its items; waits end when done
// is closed.
func New(host Host, store *history.Store, counter *history.SendCounter, cfg Config, log *slog.Logger, done <-chan struct{}) *Queries {
	q := &Queries{host: host, store: store, counter: counter, cfg: cfg, log: log, done: done,
		wake: &notifier{ch: make(chan struct{})}, events: newBroadcaster()}
	q.Claims = claims.New(claimsHost{q}, store, claims.Config{PageItems: MaxAnswer, PageBytes: MaxBytes}, log, done)
	return q
}

// notifier wakes waiters when a waking item arrives.
type notifier struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu: closed on the next waking item
}

// Woken returns a channel closed at the next waking item.
func (q *Queries) Woken() <-chan struct{} {
	q.wake.mu.Lock()
	defer q.wake.mu.Unlock()
	return q.wake.ch
}

// Notify wakes the waiters when wakes: an item that wakes was delivered.
func (q *Queries) Notify(wakes bool) {
	if !wakes {
		return
	}
	q.wake.mu.Lock()
	close(q.wake.ch)
	q.wake.ch = make(chan struct{})
	q.wake.mu.Unlock()
}

// Done is closed when the node begins to shut down.
func (q *Queries) Done() <-chan struct{} { return q.done }
