package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// sseEvent is one server-sent event.
type sseEvent struct{ typ, data string }

// readEvents parses a text/event-stream into events until it ends.
func readEvents(r io.Reader, out chan<- sseEvent) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.typ != "" || ev.data != "" {
				out <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// next returns the next event that is not a state snapshot, or of type
// state when want is "state".
func next(t *testing.T, evs <-chan sseEvent, want string) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("stream ended waiting for %q", want)
			}
			if ev.typ == "state" && want != "state" {
				continue
			}
			if ev.typ != want {
				t.Fatalf("event %q (%s), want %q", ev.typ, ev.data, want)
			}
			return ev
		case <-timeout:
			t.Fatalf("no %q event within 5s", want)
		}
	}
}

func openEvents(t *testing.T, url string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	evs := make(chan sseEvent, 64)
	go readEvents(resp.Body, evs)
	return resp, evs
}

func TestEventStream(t *testing.T) {
	src := newFakeSource()
	old := api.Item{ID: "old-1", Kind: "message", Body: "from before", Delivered: time.Now().Add(-time.Minute)}
	src.recent = []api.Item{old}
	s, hs := newTestServer(t, src, Config{SnapshotInterval: 20 * time.Millisecond})

	resp, evs := openEvents(t, hs.URL)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	// A snapshot at once, then the backlog.
	ev := next(t, evs, "state")
	var snap Snapshot
	if err := json.Unmarshal([]byte(ev.data), &snap); err != nil || snap.Self.Name != "alice" {
		t.Fatalf("state event %q: %v", ev.data, err)
	}
	ev = next(t, evs, "backlog")
	if !strings.Contains(ev.data, `"from before"`) {
		t.Fatalf("backlog event %s", ev.data)
	}
	// The subscription was taken before the backlog was read: an item in
	// both is sent once.
	src.publish(old)
	// A note that an item's attachments are present is not shown as an item.
	src.publishDelivered(readyNote{api.Rendered{ID: "ready-1", Kind: "attachments"}})
	body := `<img src=x onerror=alert(1)> & "quoted"`
	src.publish(api.Item{ID: "new-1", Kind: "message", Body: body})
	ev = next(t, evs, "item")
	var it api.Item
	if err := json.Unmarshal([]byte(ev.data), &it); err != nil || it.ID != "new-1" || it.Body != body {
		t.Fatalf("item event %s: %v", ev.data, err)
	}
	// Snapshots keep coming.
	next(t, evs, "state")
	next(t, evs, "state")

	// A reader that fell behind is told so before the next item.
	src.mu.Lock()
	for _, l := range src.subs {
		*l = true
	}
	src.mu.Unlock()
	src.publish(api.Item{ID: "new-2", Kind: "message", Body: "after the gap"})
	next(t, evs, "lagged")
	if ev := next(t, evs, "item"); !strings.Contains(ev.data, "after the gap") {
		t.Fatalf("item after lag: %s", ev.data)
	}

	// Close ends the stream and releases the subscription.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range evs {
	}
	if n := src.subscribers(); n != 0 {
		t.Fatalf("%d subscriptions left after Close", n)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestEventStreamClientGone(t *testing.T) {
	src := newFakeSource()
	_, hs := newTestServer(t, src, Config{SnapshotInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if src.subscribers() != 1 {
		t.Fatalf("%d subscribers with one stream open", src.subscribers())
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the stream's subscription released", func() bool { return src.subscribers() == 0 })
}

func TestMaxStreams(t *testing.T) {
	src := newFakeSource()
	_, hs := newTestServer(t, src, Config{MaxStreams: 1})
	_, evs := openEvents(t, hs.URL)
	next(t, evs, "state")
	if resp, _ := do(t, http.MethodGet, hs.URL+"/events", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %s, want 503", resp.Status)
	}
	// The page itself still answers.
	if resp, _ := do(t, http.MethodGet, hs.URL+"/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("page with streams full: %s", resp.Status)
	}
}
