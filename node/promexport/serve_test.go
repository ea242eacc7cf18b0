package promexport_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/promexport"
)

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr   string
		remote bool
		err    error // nil: accepted; errNotHostPort: a parse error
	}{
		{"127.0.0.1:9464", false, nil},
		{"127.0.0.1:0", false, nil},
		{"127.8.9.10:9464", false, nil},
		{"[::1]:9464", false, nil},
		{"localhost:9464", false, nil},
		{"0.0.0.0:9464", false, promexport.ErrNotLoopback},
		{":9464", false, promexport.ErrNotLoopback},
		{"[::]:9464", false, promexport.ErrNotLoopback},
		{"192.168.1.5:9464", false, promexport.ErrNotLoopback},
		{"[fe80::1%eth0]:9464", false, promexport.ErrNotLoopback},
		{"metrics.example:9464", false, promexport.ErrNotLoopback},
		{"0.0.0.0:9464", true, nil},
		{":9464", true, nil},
		{"192.168.1.5:9464", true, nil},
		{"127.0.0.1", false, errNotHostPort},
		{"", false, errNotHostPort},
	} {
		err := promexport.CheckAddr(c.addr, c.remote)
		switch {
		case c.err == nil && err != nil:
			t.Errorf("CheckAddr(%q, %v) = %v, want nil", c.addr, c.remote, err)
		case c.err == errNotHostPort && (err == nil || errors.Is(err, promexport.ErrNotLoopback)):
			t.Errorf("CheckAddr(%q, %v) = %v, want a HOST:PORT error", c.addr, c.remote, err)
		case c.err == promexport.ErrNotLoopback && !errors.Is(err, promexport.ErrNotLoopback):
			t.Errorf("CheckAddr(%q, %v) = %v, want ErrNotLoopback", c.addr, c.remote, err)
		}
	}
}

var errNotHostPort = errors.New("not host:port")

func TestServeRefusesRemoteByDefault(t *testing.T) {
	before := runtime.NumGoroutine()
	_, err := promexport.Serve(context.Background(), newFake(t), promexport.Config{Addr: "0.0.0.0:0"})
	if !errors.Is(err, promexport.ErrNotLoopback) {
		t.Fatalf("Serve on 0.0.0.0 = %v, want ErrNotLoopback", err)
	}
	checkNoLeak(t, before)
}

func TestServeAndClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := promexport.Serve(context.Background(), newFake(t), promexport.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()
	e := scrapeURL(t, base+"/metrics")
	if got := e.must(t, "meshd_envelopes_dropped_total", l("reason", "bad_signature")); got != 1 {
		t.Fatalf("drops = %g, want 1", got)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/", http.StatusNotFound},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
		{http.MethodGet, "/metrics", http.StatusOK},
	} {
		for host, want := range map[string]int{"": c.want, "localhost:9464": c.want, "[::1]": c.want,
			"evil.example": http.StatusForbidden, "evil.example:9464": http.StatusForbidden, "192.0.2.1": http.StatusForbidden} {
			req, _ := http.NewRequest(c.method, base+c.path, nil)
			if host != "" {
				req.Host = host
			}
			resp, err := noKeepAlive.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s Host %q: %d, want %d", c.method, c.path, host, resp.StatusCode, want)
			}
			if want == http.StatusForbidden && strings.Contains(string(body), "meshd_") {
				t.Errorf("%s %s Host %q: metrics in a refused answer", c.method, c.path, host)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Fatal("still listening after Close")
	}
	checkNoLeak(t, before)
}

func TestServeStopsWithContext(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := promexport.Serve(ctx, newFake(t), promexport.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	scrapeURL(t, "http://"+s.Addr().String()+"/metrics")
	cancel()
	testwait.For(t, 5*time.Second, "the listener to close after the context ended", func() bool {
		c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoLeak(t, before)
}

func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := promexport.Serve(context.Background(), newFake(t), promexport.Config{Addr: ln.Addr().String()}); err == nil {
		t.Fatal("Serve on a busy port succeeded")
	}
}
