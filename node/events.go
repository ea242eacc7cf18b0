package node

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

func (b *broadcaster) active() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs) > 0
}

func (b *broadcaster) publish(it api.Delivered) {
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
func (n *Node) SubscribeEvents() (items <-chan api.Delivered, lagged func() bool, cancel func()) {
	ch, lagged := n.events.subscribe()
	return ch, lagged, func() { n.events.unsubscribe(ch) }
}

// Done is closed when the node begins to shut down.
func (n *Node) Done() <-chan struct{} { return n.ctx.Done() }
