package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
)

// eventSubBuffer bounds the items queued for one slow event subscriber;
// beyond it the subscriber is told it lagged, never the node slowed.
const eventSubBuffer = 256

// broadcaster fans inbox items out to event-stream subscribers.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan api.Item]*bool // guarded by mu: subscriber → lagged flag
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[chan api.Item]*bool{}} }

func (b *broadcaster) subscribe() (chan api.Item, func() bool) {
	ch := make(chan api.Item, eventSubBuffer)
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

func (b *broadcaster) unsubscribe(ch chan api.Item) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

func (b *broadcaster) active() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs) > 0
}

func (b *broadcaster) publish(it api.Item) {
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

// events serves GET /v1/events: a text/event-stream of inbox items as
// they are delivered ("event: item", data one api.Item as JSON), a
// comment line every 15 s to keep idle proxies and clients honest, and
// "event: lagged" when this subscriber fell more than 256 items behind
// (read the inbox to catch up).
func (c *controlServer) events(w http.ResponseWriter, req *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeErr(w, http.StatusInternalServerError, fmt.Errorf("streaming unsupported"), "")
		return
	}
	ch, lagged := c.n.events.subscribe()
	defer c.n.events.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": meshd inbox events\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-req.Context().Done():
			return
		case <-c.n.ctx.Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keepalive\n\n")
		case it := <-ch:
			if lagged() {
				fmt.Fprint(w, "event: lagged\ndata: {}\n\n")
			}
			writeItemEvent(w, it)
			// Under load, send what else is queued with the same flush:
			// one write for many events instead of one each.
		queued:
			for range eventSubBuffer {
				select {
				case it := <-ch:
					writeItemEvent(w, it)
				default:
					break queued
				}
			}
		}
		fl.Flush()
	}
}

// writeItemEvent writes one inbox item as a server-sent event.
func writeItemEvent(w io.Writer, it api.Item) {
	b, _ := json.Marshal(it)
	fmt.Fprintf(w, "event: item\ndata: %s\n\n", b)
}
