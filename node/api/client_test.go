package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
)

// TestClientKeepsConnections: a Client sends its requests, sequential and
// concurrent, over connections it keeps, instead of dialing the socket
// once per request.
func TestClientKeepsConnections(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}`))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	defer srv.Close()

	c := NewClient(sock)
	// The transport takes a connection back into its pool just after the
	// caller has the response, so the next request can come first and
	// dial. Each sequential request waits until its connection is back,
	// so that count is exact; a client that keeps none fails there.
	var returned atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		PutIdleConn: func(error) { returned.Add(1) },
	})
	settle := func(want int64) {
		t.Helper()
		if !testwait.Until(5*time.Second, func() bool { return returned.Load() >= want }) {
			t.Fatalf("%d of %d requests gave their connection back to the pool: connections not kept", returned.Load(), want)
		}
	}
	for i := range 20 {
		var out struct{ OK bool }
		if err := c.Do(ctx, http.MethodPost, "/v1/x", "application/json", []byte(`{}`), &out); err != nil || !out.OK {
			t.Fatalf("request %d: %+v, %v", i, out, err)
		}
		settle(int64(i + 1))
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 sequential requests used %d connections, want 1", n)
	}
	// 8 at once, three times: the connections are kept between the
	// rounds. Eight would do, but a request that waits for a connection
	// both dials and watches the pool, and takes whichever comes first; a
	// dial it no longer needs still adds a connection. So the bound is 12,
	// well under the 24 a client keeping none would open.
	for range 3 {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := c.Do(ctx, http.MethodGet, "/v1/x", "", nil, nil); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if n := conns.Load(); n > 12 {
		t.Errorf("3 rounds of 8 concurrent requests used %d connections, want at most 12", n)
	}
}
