package api

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
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
	ctx := context.Background()
	for i := range 20 {
		var out struct{ OK bool }
		if err := c.Do(ctx, http.MethodPost, "/v1/x", "application/json", []byte(`{}`), &out); err != nil || !out.OK {
			t.Fatalf("request %d: %+v, %v", i, out, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 sequential requests used %d connections, want 1", n)
	}
	// 8 at once, three times: at most 8 connections in all, kept between
	// the rounds.
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
	if n := conns.Load(); n > 8 {
		t.Errorf("3 rounds of 8 concurrent requests used %d connections, want at most 8", n)
	}
}
