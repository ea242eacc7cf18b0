package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// fakeMeshd stands in for meshd on the control socket of a home: it
// answers each endpoint with a canned answer and records what meshctl
// sent, so tests see both sides of the control API without a daemon.
type fakeMeshd struct {
	home string

	mu      sync.Mutex            // guards reqs, answers and byQuery
	reqs    []fakeRequest         // in arrival order
	answers map[string]fakeAnswer // by route, "POST /v1/send"
	// byQuery answers a route from the request's query, for paged
	// answers; it takes precedence over answers.
	byQuery map[string]func(url.Values) fakeAnswer
	// unrecorded holds route prefixes whose requests are answered but
	// not recorded (the card lookup before a request).
	unrecorded []string
}

// fakeRequest is one request meshctl made.
type fakeRequest struct {
	Route       string // method and path, "POST /v1/send"
	Query       url.Values
	ContentType string
	Body        string
}

// fakeAnswer is the canned answer of a route.
type fakeAnswer struct {
	status int
	body   any           // encoded as JSON
	delay  time.Duration // before answering, as a long poll would
}

// newFakeMeshd serves a fake control API at <home>/meshd.sock in a fresh
// home and returns it.
func newFakeMeshd(t *testing.T) *fakeMeshd {
	t.Helper()
	// Not t.TempDir: a Unix socket path must stay short (about 100 bytes),
	// and test names make those long.
	home, err := os.MkdirTemp("", "meshctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ln, err := net.Listen("unix", filepath.Join(home, "meshd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMeshd{home: home, answers: map[string]fakeAnswer{}, byQuery: map[string]func(url.Values) fakeAnswer{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return f
}

// answer sets the answer of route ("GET /v1/channels").
func (f *fakeMeshd) answer(route string, status int, body any) {
	f.answerAfter(route, 0, status, body)
}

// answerQuery answers route with what fn makes of each request's query.
func (f *fakeMeshd) answerQuery(route string, fn func(url.Values) fakeAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byQuery[route] = fn
}

// answerAfter sets the answer of route, given after delay.
func (f *fakeMeshd) answerAfter(route string, delay time.Duration, status int, body any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[route] = fakeAnswer{status: status, body: body, delay: delay}
}

func (f *fakeMeshd) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	if !slices.ContainsFunc(f.unrecorded, func(p string) bool { return strings.HasPrefix(route, p) }) {
		f.reqs = append(f.reqs, fakeRequest{Route: route, Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"), Body: string(body)})
	}
	a, ok := f.answers[route]
	if fn := f.byQuery[route]; fn != nil {
		a, ok = fn(r.URL.Query()), true
	}
	f.mu.Unlock()
	if !ok {
		a = fakeAnswer{status: http.StatusNotFound, body: api.Error{Error: "no such endpoint: " + route}}
	}
	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	json.NewEncoder(w).Encode(a.body)
}

// take returns the requests made since the last take.
func (f *fakeMeshd) take() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// one returns the one request made since the last take, and fails the
// test unless there was exactly one, for route.
func (f *fakeMeshd) one(t *testing.T, route string) fakeRequest {
	t.Helper()
	reqs := f.take()
	if len(reqs) != 1 || reqs[0].Route != route {
		t.Fatalf("requests %+v, want one %s", reqs, route)
	}
	return reqs[0]
}

// none fails the test if meshctl made any request since the last take.
func (f *fakeMeshd) none(t *testing.T) {
	t.Helper()
	if reqs := f.take(); len(reqs) != 0 {
		t.Fatalf("unexpected requests %+v", reqs)
	}
}

// mc runs meshctl on the fake's home with stdin.
func (f *fakeMeshd) mc(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"--home", f.home}, args...), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// ok runs meshctl on the fake's home and fails the test unless it exits 0.
func (f *fakeMeshd) ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := f.mc(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("meshctl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs meshctl on the fake's home and expects exit status code and
// stderr holding the meshctl: prefix and each of want.
func (f *fakeMeshd) fails(t *testing.T, code int, args []string, want ...string) result {
	t.Helper()
	return f.failsIn(t, code, "", args, want...)
}

// failsIn is fails with stdin.
func (f *fakeMeshd) failsIn(t *testing.T, code int, stdin string, args []string, want ...string) result {
	t.Helper()
	r := f.mc(t, stdin, args...)
	if r.code != code {
		t.Fatalf("meshctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "meshctl: ") {
		t.Errorf("stderr %q lacks the meshctl: prefix", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("meshctl %s: stderr %q lacks %q", strings.Join(args, " "), r.stderr, w)
		}
	}
	return r
}
