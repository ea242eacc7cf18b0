package inboxq

import (
	"sync"

	"github.com/meshd/meshd/node/api"
)

// eventSubBuffer bounds the items queued for one slow event subscriber;
// beyond it the subscriber is told it lagged, never the node slowed.
const eventSubBuffer = 256

// broadcaster fans inbox items out to event-stream subscribers. It
// queues them unrendered: each subscriber renders on its own goroutine.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan api.Delivered]*bool // guarded by mu: subscriber → lagged flag
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[chan api.Delivered]*bool{}} }

func (b *broadcaster) subscribe() (chan api.Delivered, func() bool) {
	ch := make(chan api.Delivered, eventSubBuffer)
	lagged := new(bool)
	b.mu.Lock()
	b.subs[ch] = lagged
	b.mu.Unlock()
	return ch, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		l := *lagged
		*lagged = false
		return l
	}
}

func (b *broadcaster) unsubscribe(ch chan api.Delivered) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

// Listening reports whether anyone subscribed to the delivered items, so
// a publisher that has none need not make one.
func (q *Queries) Listening() bool {
	b := q.events
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs) > 0
}

// Publish hands it to every subscriber, unrendered; a subscriber whose
// queue is full loses it and is told it lagged.
func (q *Queries) Publish(it api.Delivered) {
	b := q.events
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, lagged := range b.subs {
		select {
		case ch <- it:
		default:
			*lagged = true
		}
	}
}

// SubscribeEvents returns the inbox items delivered from now on, to be
// rendered by the reader, lagged, which reports (and resets) whether
// items were lost because the subscriber fell more than eventSubBuffer
// items behind, and cancel, which ends the subscription.
func (q *Queries) SubscribeEvents() (items <-chan api.Delivered, lagged func() bool, cancel func()) {
	ch, lagged := q.events.subscribe()
	return ch, lagged, func() { q.events.unsubscribe(ch) }
}

// SubscribeItems registers a reader of inbox items as they are delivered,
// the feed of the status page. Items arrive on items, unrendered (the
// reader renders each with Item, on its own goroutine); when the reader
// falls 256 items behind, newer ones are dropped for it and lagged
// reports true once. cancel unregisters the reader; items is never closed.
func (q *Queries) SubscribeItems() (items <-chan api.Delivered, lagged func() bool, cancel func()) {
	ch, lag := q.events.subscribe()
	var once sync.Once
	return ch, lag, func() { once.Do(func() { q.events.unsubscribe(ch) }) }
}
