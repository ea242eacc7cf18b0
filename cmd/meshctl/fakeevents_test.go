package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// fakeEvents is a [fakeMeshd] that also serves GET /v1/events: a
// text/event-stream the test feeds with [fakeEvents.item] and friends.
// Every other route is the fake's canned answer.
type fakeEvents struct {
	*fakeMeshd

	mu      sync.Mutex         // guards readers
	readers []chan string      // one per open stream: raw SSE text to write
	joined  chan struct{}      // a token per stream opened
	stop    context.CancelFunc // ends every stream, as a stopping meshd does
	ctx     context.Context
}

// newFakeEvents serves the fake control API with an event stream at
// <home>/meshd.sock in a fresh home.
func newFakeEvents(t *testing.T) *fakeEvents {
	t.Helper()
	home, err := os.MkdirTemp("", "meshctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ln, err := net.Listen("unix", filepath.Join(home, "meshd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEvents{
		fakeMeshd: &fakeMeshd{home: home, answers: map[string]fakeAnswer{}},
		joined:    make(chan struct{}, 16),
	}
	f.ctx, f.stop = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events", f.events)
	mux.HandleFunc("/", f.serve)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		f.stop()
		srv.Close()
	})
	return f
}

func (f *fakeEvents) events(w http.ResponseWriter, r *http.Request) {
	ch := make(chan string, 64)
	f.mu.Lock()
	f.readers = append(f.readers, ch)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": meshd inbox events\n\n")
	w.(http.Flusher).Flush()
	select {
	case f.joined <- struct{}{}:
	default:
	}
	for {
		select {
		case s := <-ch:
			fmt.Fprint(w, s)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		case <-f.ctx.Done():
			return
		}
	}
}

// waitReader waits until a reader has opened the stream.
func (f *fakeEvents) waitReader(t *testing.T) {
	t.Helper()
	select {
	case <-f.joined:
	case <-time.After(5 * time.Second):
		t.Fatal("nobody opened the event stream")
	}
}

// waitRequest waits until meshctl has made a request for route, and
// takes the requests made so far.
func (f *fakeEvents) waitRequest(t *testing.T, route string) []fakeRequest {
	t.Helper()
	var reqs []fakeRequest
	if !testwait.Until(5*time.Second, func() bool {
		reqs = append(reqs, f.take()...)
		return slices.ContainsFunc(reqs, func(r fakeRequest) bool { return r.Route == route })
	}) {
		t.Fatalf("no %s request; got %+v", route, reqs)
	}
	return reqs
}

// send writes raw event-stream text to every open stream.
func (f *fakeEvents) send(raw string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.readers {
		ch <- raw
	}
}

// item streams it as meshd does.
func (f *fakeEvents) item(t *testing.T, it api.Item) {
	t.Helper()
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	f.send("event: item\ndata: " + string(b) + "\n\n")
}

// lagged streams the note that the reader fell behind.
func (f *fakeEvents) lagged() { f.send("event: lagged\ndata: {}\n\n") }

// end ends every stream, as a stopping meshd does.
func (f *fakeEvents) end() { f.stop() }

// syncBuffer is a bytes.Buffer safe for a command writing in one
// goroutine while the test reads in another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until s holds want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	if !testwait.Until(5*time.Second, func() bool { return strings.Contains(s.String(), want) }) {
		t.Fatalf("output lacks %q:\n%s", want, s.String())
	}
}

// background runs meshctl on the fake's home in a goroutine with
// interruptContext replaced, and returns its output and a stop function
// that sends the "Ctrl-C" and returns the exit status.
func (f *fakeEvents) background(t *testing.T, args ...string) (stdout, stderr *syncBuffer, interrupt func() int, done <-chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	old := interruptContext
	interruptContext = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	t.Cleanup(func() { interruptContext = old; cancel() })
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ch := make(chan int, 1)
	go func() { ch <- run(append([]string{"--home", f.home}, args...), nil, stdout, stderr) }()
	interrupt = func() int {
		t.Helper()
		cancel()
		select {
		case code := <-ch:
			return code
		case <-time.After(5 * time.Second):
			t.Fatalf("meshctl %s did not stop on Ctrl-C", strings.Join(args, " "))
			return -1
		}
	}
	return stdout, stderr, interrupt, ch
}
