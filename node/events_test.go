package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// openEvents opens n's event stream over its control socket, for at most
// limit, and waits until n has the subscriber.
func openEvents(t *testing.T, n *Node, limit time.Duration) *http.Response {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", n.ControlSocket())
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://meshd/v1/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	waitFor(t, 5*time.Second, "subscriber", n.q.Listening)
	return resp
}

func TestEventStreamCarriesNewItems(t *testing.T) {
	t.Parallel()
	_, a, b := linkedPair(t)
	resp := openEvents(t, a, 10*time.Second)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if _, err := b.out.Send(api.Send{To: "a", Body: "ping over sse"}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var it api.Item
			if err := json.Unmarshal([]byte(data), &it); err != nil {
				t.Fatal(err)
			}
			if it.Body != "ping over sse" || it.Priority != "high" || it.From.Name != "b" {
				t.Fatalf("event item %+v", it)
			}
			return
		}
	}
	t.Fatalf("stream ended: %v", sc.Err())
}

// TestEventStreamBurstInOrder sends a burst that queues several items per
// flush of the stream: each must arrive once, in order.
func TestEventStreamBurstInOrder(t *testing.T) {
	t.Parallel()
	_, a, b := linkedPair(t)
	resp := openEvents(t, a, 20*time.Second)
	const n = 60
	sendErr := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := b.out.Send(api.Send{To: "a", Body: fmt.Sprintf("burst %d", i)}); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	next := 0
	for next < n && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "{}" {
			continue
		}
		var it api.Item
		if err := json.Unmarshal([]byte(data), &it); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("burst %d", next); it.Body != want {
			t.Fatalf("item %d: body %q, want %q", next, it.Body, want)
		}
		next++
	}
	if next < n {
		t.Fatalf("stream ended after %d of %d items: %v (send: %v)", next, n, sc.Err(), <-sendErr)
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
}

// TestEventItemsRenderedByReader: the commit stage hands subscribers the
// delivery unrendered, and the reader's rendering carries the delivery's
// facts: the item as the inbox lists it, with the time of its commit.
func TestEventItemsRenderedByReader(t *testing.T) {
	t.Parallel()
	_, a, b := linkedPair(t)
	items, _, cancel := a.q.SubscribeEvents()
	defer cancel()
	sent, err := b.out.Send(api.Send{To: "a", Body: "rendered by its reader"})
	if err != nil {
		t.Fatal(err)
	}
	var d api.Delivered
	select {
	case d = <-items:
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	if _, ok := d.(*inboxDelivery); !ok {
		t.Fatalf("subscriber got %T, want the unrendered delivery", d)
	}
	got := d.Item()
	if got.ID != sent.ID || got.Body != "rendered by its reader" || got.Priority != "high" || !got.Wakes || got.From.Name != "b" {
		t.Fatalf("rendered event item %+v", got)
	}
	in, err := a.q.InboxPage(context.Background(), api.InboxQuery{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range in.Items {
		if it.ID != sent.ID {
			continue
		}
		if it.Kind != got.Kind || it.To != got.To || it.Channel != got.Channel || !it.Sent.Equal(got.Sent) || it.FromHistory != got.FromHistory {
			t.Fatalf("event item %+v, inbox item %+v", got, it)
		}
		if dt := got.Delivered.Sub(it.Delivered); dt < 0 || dt > 5*time.Second {
			t.Fatalf("event delivered %v, inbox %v", got.Delivered, it.Delivered)
		}
		return
	}
	t.Fatalf("sent %s not in a's inbox", sent.ID)
}
