package localhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackHostHeader(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost:8080":     true,
		"LOCALHOST":          true,
		"127.0.0.1":          true,
		"127.0.0.2:80":       true,
		"[::1]:8080":         true,
		"::1":                true,
		"evil.example":       false,
		"evil.example:8080":  false,
		"192.0.2.1:8080":     false,
		"localhost.evil.com": false,
		"":                   false,
		"[::ffff:127.0.0.1]": true,
	} {
		if got := LoopbackHostHeader(host); got != want {
			t.Errorf("LoopbackHostHeader(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestHostGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("secret")) })
	for _, tc := range []struct {
		host   string
		remote bool
		code   int
	}{
		{"127.0.0.1:9", false, 200},
		{"evil.example", false, 403},
		{"evil.example", true, 200},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = tc.host
		HostGuard(ok, tc.remote, "the metrics endpoint").ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("Host %q remote %v: %d, want %d", tc.host, tc.remote, rec.Code, tc.code)
		}
		if tc.code == 403 && rec.Body.String() == "secret" {
			t.Errorf("Host %q: body leaked", tc.host)
		}
	}
}
