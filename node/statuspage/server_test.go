package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

var (
	keySelf  = proto.PubKey{1}
	keyBob   = proto.PubKey{2}
	keyCarol = proto.PubKey{3}
	keyDave  = proto.PubKey{4}
)

// fakeSource is a node with canned state and an item feed the test drives.
type fakeSource struct {
	mu      sync.Mutex
	subs    map[chan api.Delivered]*bool // guarded by mu: open subscriptions → lagged
	recent  []api.Item                   // guarded by mu
	reports map[proto.PubKey][]proto.PubKey
}

func newFakeSource() *fakeSource {
	return &fakeSource{subs: map[chan api.Delivered]*bool{},
		reports: map[proto.PubKey][]proto.PubKey{keyBob: {keyCarol, keySelf}}}
}

func member(k proto.PubKey, name, role string) api.Member {
	return api.Member{Key: k, Fingerprint: k.Fingerprint(), Name: name, Role: role}
}

func (f *fakeSource) StatusInfo() api.Status {
	return api.Status{Key: keySelf, Fingerprint: keySelf.Fingerprint(), Name: "alice", Role: "admin", Org: "acme",
		RosterVersion: 3, RosterMembers: 4, Links: 1, Counters: map[string]uint64{"rx.envelopes": 7, "drop.duplicate": 2}}
}

func (f *fakeSource) RosterInfo() api.Roster {
	return api.Roster{Org: "acme", Version: 3, Quorum: 1, Members: []api.Member{
		member(keySelf, "alice", "admin"), member(keyBob, "bob", "operator"),
		member(keyCarol, "carol", "member"), member(keyDave, "dave", "member")}}
}

func (f *fakeSource) PeerList() []api.Peer {
	return []api.Peer{{Key: keyBob, Fingerprint: keyBob.Fingerprint(), Name: "bob", Role: "operator",
		Network: "tcp", Direction: "outbound", Address: "127.0.0.1:7437"}}
}

func (f *fakeSource) PresenceTable() api.Presence {
	return api.Presence{TTLSeconds: 300, Entries: []api.PresenceEntry{
		{Party: api.Party{Key: keySelf, Name: "alice"}, State: "online", Self: true},
		{Party: api.Party{Key: keyBob, Name: "bob"}, State: "away"}}}
}

func (f *fakeSource) ChannelList() []api.Channel {
	return []api.Channel{{Name: "general", Subscription: "subscribed", CanRead: true, CanWrite: true}}
}

func (f *fakeSource) CardList(string) api.Cards {
	return api.Cards{Cards: []api.Card{{Party: api.Party{Fingerprint: "fp-bob", Name: "bob"}, Version: 1,
		Description: "CI runner", Intents: []api.CardIntent{{Name: "run-tests", Summary: "go test"}}, Presence: "online"}}}
}

func (f *fakeSource) LinkReports() map[proto.PubKey][]proto.PubKey { return f.reports }

func (f *fakeSource) RecentItems(limit int) ([]api.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.recent) > limit {
		return append([]api.Item(nil), f.recent[len(f.recent)-limit:]...), nil
	}
	return append([]api.Item(nil), f.recent...), nil
}

func (f *fakeSource) SubscribeItems() (<-chan api.Delivered, func() bool, func()) {
	ch := make(chan api.Delivered, 4)
	lagged := new(bool)
	f.mu.Lock()
	f.subs[ch] = lagged
	f.mu.Unlock()
	return ch, func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			l := *lagged
			*lagged = false
			return l
		}, func() {
			f.mu.Lock()
			delete(f.subs, ch)
			f.mu.Unlock()
		}
}

// publish delivers it to every subscriber, marking full ones lagged.
func (f *fakeSource) publish(it api.Item) { f.publishDelivered(api.Rendered(it)) }

// readyNote is an "attachments present" note, which is no new item.
type readyNote struct{ api.Rendered }

func (r readyNote) Ready() api.AttachmentsReady {
	return api.AttachmentsReady{Kind: "attachments", ID: r.ID}
}

func (f *fakeSource) publishDelivered(d api.Delivered) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch, lagged := range f.subs {
		select {
		case ch <- d:
		default:
			*lagged = true
		}
	}
}

func (f *fakeSource) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func newTestServer(t *testing.T, src Source, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	s, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, hs
}

// testToken is the token of the servers newTestServer makes.
const testToken = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"

// do sends one request with the test token as a bearer token, unless
// header sets Authorization itself ("" sends none).
func do(t *testing.T, method, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("x=1"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

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

func TestStateSnapshot(t *testing.T) {
	_, hs := newTestServer(t, newFakeSource(), Config{})
	_, body := do(t, http.MethodGet, hs.URL+"/api/state", nil)
	var snap Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Self.Name != "alice" || len(snap.Peers) != 1 || len(snap.Roster.Members) != 4 ||
		len(snap.Channels) != 1 || snap.Time.IsZero() {
		t.Fatalf("snapshot %+v", snap)
	}
	if len(snap.Cards) != 1 || snap.Cards[0].Name != "bob" || snap.Cards[0].Intents[0].Name != "run-tests" {
		t.Fatalf("snapshot cards %+v", snap.Cards)
	}
	if len(snap.Graph.Nodes) != 4 || !snap.Graph.Nodes[0].Self || len(snap.Graph.Edges) != 2 {
		t.Fatalf("graph %+v", snap.Graph)
	}
}

func TestBuildGraph(t *testing.T) {
	f := newFakeSource()
	stranger := proto.PubKey{9}
	reports := map[proto.PubKey][]proto.PubKey{
		keyBob:   {keyCarol, keySelf, stranger, keyBob}, // self: already a link; stranger: not a member
		keyCarol: {keyBob},                              // the same pair again
		stranger: {keyDave},                             // from a non-member: ignored
	}
	g := buildGraph(f.StatusInfo(), f.RosterInfo(), f.PeerList(), f.PresenceTable(), reports)
	var names []string
	for _, n := range g.Nodes {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "alice,bob,carol,dave" {
		t.Fatalf("nodes %v: want this node first, then by name", names)
	}
	if !g.Nodes[1].Linked || g.Nodes[1].Presence != "away" || g.Nodes[2].Linked || g.Nodes[0].Presence != "online" {
		t.Fatalf("node flags %+v", g.Nodes)
	}
	if len(g.Edges) != 2 {
		t.Fatalf("edges %+v, want alice-bob (link) and bob-carol (reported)", g.Edges)
	}
	link, rep := g.Edges[0], g.Edges[1]
	if link.Kind != EdgeLink || link.Network != "tcp" || !sameEdge(link, keySelf, keyBob) {
		t.Errorf("link edge %+v", link)
	}
	if rep.Kind != EdgeReported || !sameEdge(rep, keyBob, keyCarol) {
		t.Errorf("reported edge %+v", rep)
	}
}

func sameEdge(e GraphEdge, a, b proto.PubKey) bool {
	return e.A.Equal(a) && e.B.Equal(b) || e.A.Equal(b) && e.B.Equal(a)
}

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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, what, cond)
}

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
