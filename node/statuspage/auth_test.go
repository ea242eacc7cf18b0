package statuspage

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTokenRequired: without the token every path answers 401 and no
// data; a wrong token in any form is refused; the login URL sets an
// HttpOnly, SameSite=Strict cookie and redirects without the token; a
// foreign Host is refused even with the token.
func TestTokenRequired(t *testing.T) {
	s, hs := newTestServer(t, newFakeSource(), Config{SnapshotInterval: 10 * time.Millisecond})
	paths := []string{"/", "/app.js", "/style.css", "/favicon.svg", "/api/state", "/events", "/nope"}
	for _, p := range paths {
		for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Bearer " + testToken + "x", "Basic " + testToken} {
			for _, method := range []string{"GET", "HEAD", "POST"} {
				resp, body := do(t, method, hs.URL+p, map[string]string{"Authorization": auth})
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s %s with %q: %s, want 401", method, p, auth, resp.Status)
				}
				if strings.Contains(body, "alice") || strings.Contains(body, "EventSource") || strings.Contains(body, "<svg") {
					t.Errorf("%s %s with %q: body carries data: %q", method, p, auth, body)
				}
				if resp.Header.Get("Set-Cookie") != "" {
					t.Errorf("%s %s with %q: sets a cookie", method, p, auth)
				}
			}
		}
		resp, _ := do(t, "GET", hs.URL+p, map[string]string{"Authorization": "", "Cookie": s.cookieName() + "=wrong"})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong cookie: %s", p, resp.Status)
		}
		resp, _ = do(t, "GET", hs.URL+p+"?token=wrong", map[string]string{"Authorization": ""})
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s?token=wrong: %s, cookie %q", p, resp.Status, resp.Header.Get("Set-Cookie"))
		}
		resp, _ = do(t, "GET", hs.URL+"/api/state", map[string]string{"Host": "evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Host evil.example with the token: %s", resp.Status)
		}
	}

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(hs.URL + "/?token=" + testToken + "&x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?x=1" {
		t.Fatalf("login: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != s.cookieName() || !cookies[0].HttpOnly ||
		cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" {
		t.Fatalf("login cookie %+v", cookies)
	}
	resp, body := do(t, "GET", hs.URL+"/api/state", map[string]string{"Authorization": "", "Cookie": cookies[0].Name + "=" + cookies[0].Value})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("with the cookie: %s %q", resp.Status, body)
	}

	other, err := New(newFakeSource(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(other.Token()) < minTokenLen || other.Token() == testToken || other.cookieName() == s.cookieName() {
		t.Fatalf("generated token %q, cookie %q", other.Token(), other.cookieName())
	}
	if _, err := New(newFakeSource(), Config{Token: "short"}); err == nil {
		t.Fatal("a short token was accepted")
	}
}

func TestURLFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadURLFile(dir); !errors.Is(err, ErrNoPage) {
		t.Fatalf("no file: %v", err)
	}
	u := "http://127.0.0.1:1234/?token=abc"
	if err := WriteURLFile(dir, u); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, URLFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("url file: %v, %v", st, err)
	}
	if got, err := ReadURLFile(dir); err != nil || got != u {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := RemoveURLFile(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveURLFile(dir); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}
