package statuspage

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestPageAndAssets(t *testing.T) {
	_, hs := newTestServer(t, newFakeSource(), Config{})
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<svg id="graph"`},
		{"/app.js", "text/javascript; charset=utf-8", "EventSource"},
		{"/style.css", "text/css; charset=utf-8", "#graph"},
		{"/favicon.svg", "image/svg+xml", "<svg"},
		{"/api/state", "application/json", `"graph"`},
	} {
		resp, body := do(t, http.MethodGet, hs.URL+tc.path, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType {
			t.Errorf("GET %s: %s, %q; want 200, %q", tc.path, resp.Status, resp.Header.Get("Content-Type"), tc.contentType)
		}
		if !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: headers %v", tc.path, resp.Header)
		}
		resp, body = do(t, http.MethodHead, hs.URL+tc.path, nil)
		if resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s: %s with %d bytes", tc.path, resp.Status, len(body))
		}
	}
	resp, _ := do(t, http.MethodGet, hs.URL+"/", nil)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "form-action 'none'") {
		t.Errorf("page CSP %q", csp)
	}
	for _, p := range []string{"/nope", "/index.html", "/assets/app.js", "/api/state/x"} {
		if resp, _ := do(t, http.MethodGet, hs.URL+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", p, resp.Status)
		}
	}
}

func TestReadOnly(t *testing.T) {
	_, hs := newTestServer(t, newFakeSource(), Config{})
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, p := range []string{"/", "/events", "/api/state", "/app.js", "/nope"} {
			resp, body := do(t, method, hs.URL+p, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s, Allow %q; want 405, GET, HEAD", method, p, resp.Status, resp.Header.Get("Allow"))
			}
			if !strings.Contains(body, "read-only") {
				t.Errorf("%s %s: body %q", method, p, body)
			}
		}
	}
}

func TestHostGuard(t *testing.T) {
	_, hs := newTestServer(t, newFakeSource(), Config{})
	for host, want := range map[string]int{
		"localhost:8080":     http.StatusOK,
		"LOCALHOST":          http.StatusOK,
		"127.0.0.1":          http.StatusOK,
		"127.0.0.2:80":       http.StatusOK,
		"[::1]:8080":         http.StatusOK,
		"evil.example":       http.StatusForbidden,
		"evil.example:8080":  http.StatusForbidden,
		"192.0.2.1:8080":     http.StatusForbidden,
		"localhost.evil.com": http.StatusForbidden,
	} {
		if resp, _ := do(t, http.MethodGet, hs.URL+"/api/state", map[string]string{"Host": host}); resp.StatusCode != want {
			t.Errorf("Host %s: %s, want %d", host, resp.Status, want)
		}
	}
	_, remote := newTestServer(t, newFakeSource(), Config{AllowRemote: true})
	if resp, _ := do(t, http.MethodGet, remote.URL+"/", map[string]string{"Host": "meshbox.lan:8080"}); resp.StatusCode != http.StatusOK {
		t.Errorf("AllowRemote, Host meshbox.lan: %s", resp.Status)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		want   error // nil: accepted; errAny: refused for its form
	}{
		{"127.0.0.1:8080", false, nil},
		{"127.0.0.1:0", false, nil},
		{"localhost:8080", false, nil},
		{"[::1]:8080", false, nil},
		{"0.0.0.0:8080", false, ErrNotLoopback},
		{":8080", false, ErrNotLoopback},
		{"[::]:8080", false, ErrNotLoopback},
		{"192.0.2.1:8080", false, ErrNotLoopback},
		{"meshbox.lan:8080", false, ErrNotLoopback},
		{"0.0.0.0:8080", true, nil},
		{":8080", true, nil},
		{"127.0.0.1", false, errAny},
		{"127.0.0.1:", false, errAny},
		{"", false, errAny},
	} {
		err := CheckAddr(tc.addr, tc.remote)
		switch {
		case tc.want == nil && err != nil, tc.want != nil && err == nil:
			t.Errorf("CheckAddr(%q, %v) = %v, want %v", tc.addr, tc.remote, err, tc.want)
		case tc.want == ErrNotLoopback && !errors.Is(err, ErrNotLoopback):
			t.Errorf("CheckAddr(%q) = %v, want ErrNotLoopback", tc.addr, err)
		case tc.want == errAny && errors.Is(err, ErrNotLoopback):
			t.Errorf("CheckAddr(%q) = %v, want a malformed-address error", tc.addr, err)
		}
	}
	if _, err := New(newFakeSource(), Config{Addr: "0.0.0.0:1"}); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("New with a wildcard address: %v", err)
	}
}

var errAny = errors.New("any error")

func TestStartClose(t *testing.T) {
	before := runtime.NumGoroutine()
	src := newFakeSource()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.SnapshotInterval = 10 * time.Millisecond
	s, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}
	tr := &http.Transport{}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Transport: tr, Jar: jar}
	resp, err := client.Get(s.URL() + "events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("events before login: %s", resp.Status)
	}
	// The login URL sets the cookie and sends the browser on to the page.
	resp, err = client.Get(s.LoginURL())
	if err != nil || resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Fatalf("login: %v, %v", resp, err)
	}
	resp.Body.Close()
	resp, err = client.Get(s.URL() + "events")
	if err != nil {
		t.Fatal(err)
	}
	evs := make(chan sseEvent, 64)
	go readEvents(resp.Body, evs)
	next(t, evs, "state")
	if err := s.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range evs {
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	if _, err := client.Get(s.URL()); err == nil {
		t.Fatal("server answers after Close")
	}
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// TestAssetsTreatDataAsText guards the page's rules: data goes in as text,
// nothing loads from elsewhere, and there is nothing to act with.
func TestAssetsTreatDataAsText(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setHTMLUnsafe`)
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "") // the SVG namespace, not a fetch
		if m := banned.FindString(text); m != "" {
			t.Errorf("%s uses %s", p, m)
		}
		if m := external.FindString(text); m != "" {
			t.Errorf("%s refers to %s: the page must not load anything from elsewhere", p, m)
		}
		if strings.HasSuffix(p, ".html") {
			lower := strings.ToLower(text)
			for _, bad := range []string{"<form", "<button", "<input", "<textarea", "<select", "<script>", "javascript:"} {
				if strings.Contains(lower, bad) {
					t.Errorf("%s contains %s", p, bad)
				}
			}
			if regexp.MustCompile(`\son[a-z]+=`).MatchString(lower) {
				t.Errorf("%s has an inline event handler", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path := range assetFiles {
		if _, err := assets.ReadFile(assetFiles[path].path); err != nil {
			t.Errorf("asset %s: %v", path, err)
		}
	}
}
