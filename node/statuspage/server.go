package statuspage

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/localhttp"
)

// Config configures a [Server]. Start from [DefaultConfig].
type Config struct {
	// Addr is the TCP address to listen on, HOST:PORT. Port 0 picks a
	// free port; [Server.Addr] tells which.
	Addr string
	// AllowRemote lets Addr be beyond loopback and lets requests name any
	// host. Off by default: the page shows names and message bodies, and
	// its token and cookie cross the network in plain HTTP.
	AllowRemote bool
	// Token is the secret every request must show (see the package doc).
	// Empty: New makes a random one, which [Server.Token] returns. There
	// is no way to turn the check off.
	Token string
	// SnapshotInterval is how often an event stream gets a state
	// snapshot. Default 1s: live to a person, a handful of map copies
	// a second for the node.
	SnapshotInterval time.Duration
	// Backlog is how many of the newest inbox items a new event stream
	// starts with. Default 50: enough to fill the tail on a reload.
	Backlog int
	// MaxStreams bounds the event streams open at once. Default 16: a
	// few browser tabs; each stream holds an inbox subscription.
	MaxStreams int
	// WriteTimeout bounds one write to a client; a reader stalled longer
	// is cut off. Default 10s.
	WriteTimeout time.Duration
	// Logger receives the server's errors. Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, with no Addr.
func DefaultConfig() Config {
	return Config{SnapshotInterval: time.Second, Backlog: 50, MaxStreams: 16, WriteTimeout: 10 * time.Second}
}

// ErrNotLoopback reports an address beyond loopback without
// [Config.AllowRemote].
var ErrNotLoopback = errors.New("not a loopback address")

// CheckAddr checks a listen address: HOST:PORT, with HOST a loopback IP or
// "localhost" unless allowRemote. An empty HOST (":8080") listens on every
// interface, so it needs allowRemote too.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("http address %q: want HOST:PORT, like 127.0.0.1:8080", addr)
	}
	if allowRemote || isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("http address %q: %w (the page and its token would cross the network in plain HTTP)", addr, ErrNotLoopback)
}

func isLoopbackHost(host string) bool { return localhttp.IsLoopbackHost(host) }

//go:embed assets
var assets embed.FS

// asset is one embedded file and how it is served.
type asset struct {
	path, contentType string
}

var assetFiles = map[string]asset{
	"/":            {"assets/index.html", "text/html; charset=utf-8"},
	"/app.js":      {"assets/app.js", "text/javascript; charset=utf-8"},
	"/style.css":   {"assets/style.css", "text/css; charset=utf-8"},
	"/favicon.svg": {"assets/favicon.svg", "image/svg+xml"},
}

// contentSecurityPolicy lets the page load only its own script, style
// and icon, and talk only to this server: even text that slipped into
// markup could run no script and send nothing elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Server is the status page's HTTP server. Create it with [New]; serve
// with [Server.Start] or mount [Server.Handler]; stop with [Server.Close].
type Server struct {
	cfg     Config
	src     Source
	log     *slog.Logger
	handler http.Handler
	streams chan struct{} // one token per open event stream

	ctx    context.Context // ends on Close, ending the streams
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool           // guarded by mu
	ln     net.Listener   // guarded by mu; nil until Start
	srv    *http.Server   // guarded by mu; nil until Start
	wg     sync.WaitGroup // Serve and the streams; Add under mu while !closed

	closeOnce sync.Once
	closeErr  error
}

// New returns a server showing src. It does not listen yet. Zero fields of
// cfg take their defaults, but a non-empty Addr must pass [CheckAddr].
func New(src Source, cfg Config) (*Server, error) {
	def := DefaultConfig()
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = def.SnapshotInterval
	}
	if cfg.Backlog < 0 {
		cfg.Backlog = 0
	} else if cfg.Backlog == 0 {
		cfg.Backlog = def.Backlog
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = def.MaxStreams
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = def.WriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Addr != "" {
		if err := CheckAddr(cfg.Addr, cfg.AllowRemote); err != nil {
			return nil, err
		}
	}
	if cfg.Token == "" {
		tok, err := NewToken()
		if err != nil {
			return nil, err
		}
		cfg.Token = tok
	} else if len(cfg.Token) < minTokenLen {
		return nil, fmt.Errorf("status page token of %d characters: want at least %d", len(cfg.Token), minTokenLen)
	}
	s := &Server{cfg: cfg, src: src, log: cfg.Logger, streams: make(chan struct{}, cfg.MaxStreams)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	for p := range assetFiles {
		pattern := "GET " + p
		if p == "/" {
			pattern = "GET /{$}"
		}
		mux.HandleFunc(pattern, s.serveAsset)
	}
	mux.HandleFunc("GET /api/state", s.serveState)
	mux.HandleFunc("GET /events", s.serveEvents)
	s.handler = s.guard(mux)
	return s, nil
}

// Handler returns the server's HTTP handler, guards included.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on [Config.Addr] and serves until [Server.Close].
func (s *Server) Start() error {
	if s.cfg.Addr == "" {
		return errors.New("status page: no address to listen on")
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	if s.closed || s.srv != nil {
		s.mu.Unlock()
		ln.Close()
		return errors.New("status page: already started or closed")
	}
	s.ln, s.srv = ln, srv
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("status page", "err", err)
		}
	}()
	return nil
}

// Addr returns the address the server listens on, or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL returns the page's address, without the token, or "" before Start.
func (s *Server) URL() string {
	if a := s.Addr(); a != "" {
		return "http://" + a + "/"
	}
	return ""
}

// LoginURL returns the page's address with the token, which logs a
// browser in; "" before Start. It is a secret: give it to the owner only.
func (s *Server) LoginURL() string {
	if u := s.URL(); u != "" {
		return u + "?" + tokenParam + "=" + url.QueryEscape(s.cfg.Token)
	}
	return ""
}

// Token returns the secret requests must show.
func (s *Server) Token() string { return s.cfg.Token }

// Close stops the server, ends the event streams and waits for them. It
// is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		srv := s.srv
		s.mu.Unlock()
		s.cancel()
		if srv != nil {
			s.closeErr = srv.Close()
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// track registers a running stream with Close; false once closed.
func (s *Server) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// guard sets the headers every answer carries, then answers only a
// loopback Host unless remote access is allowed (403), only a request
// that shows the token (401), and only GET and HEAD (405). A request with
// the token in its query is logged in (a cookie) and sent on to the same
// path without it.
func (s *Server) guard(next http.Handler) http.Handler {
	return localhttp.HostGuard(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		if !s.authorized(w, req) {
			return
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "the status page is read-only: act with meshctl on the control socket")
			return
		}
		next.ServeHTTP(w, req)
	}), s.cfg.AllowRemote, "the status page")
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

func (s *Server) serveAsset(w http.ResponseWriter, req *http.Request) {
	a, ok := assetFiles[req.URL.Path]
	if !ok {
		http.NotFound(w, req)
		return
	}
	b, err := assets.ReadFile(a.path)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "asset missing")
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	if req.URL.Path == "/" {
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	}
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

func (s *Server) serveState(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if req.Method == http.MethodHead {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(takeSnapshot(s.src))
}

// serveEvents serves GET /events (see the package doc).
func (s *Server) serveEvents(w http.ResponseWriter, req *http.Request) {
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		writeError(w, http.StatusServiceUnavailable, "too many open event streams")
		return
	}
	if !s.track() {
		writeError(w, http.StatusServiceUnavailable, "the status page is shutting down")
		return
	}
	defer s.wg.Done()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	if req.Method == http.MethodHead {
		return
	}
	items, lagged, cancel := s.src.SubscribeItems()
	defer cancel()
	st := &stream{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	w.WriteHeader(http.StatusOK)
	// retry: how long a browser waits before it reconnects.
	st.printf("retry: 2000\n: meshd status events\n\n")

	// Subscribed first, so nothing falls between the backlog and the live
	// items; an item in both is sent once.
	backlog, err := s.src.RecentItems(s.cfg.Backlog)
	if err != nil {
		s.log.Warn("status page: recent inbox items", "err", err)
	}
	sortItems(backlog)
	inBacklog := map[string]bool{}
	for _, it := range backlog {
		inBacklog[it.ID] = true
	}
	st.event("state", takeSnapshot(s.src))
	for _, it := range backlog {
		st.event("backlog", it)
	}
	if st.flush() != nil {
		return
	}
	tick := time.NewTicker(s.cfg.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-req.Context().Done():
			return
		case <-tick.C:
			st.event("state", takeSnapshot(s.src))
		case d := <-items:
			if lagged() {
				st.printf("event: lagged\ndata: {}\n\n")
			}
			if _, ok := d.(api.ReadyDelivered); ok {
				continue // not a new item
			}
			it := d.Item()
			if inBacklog[it.ID] {
				delete(inBacklog, it.ID)
				continue
			}
			st.event("item", it)
		}
		if st.flush() != nil {
			return
		}
	}
}

// stream writes server-sent events; the first error sticks.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

func (st *stream) printf(format string, args ...any) {
	if st.err != nil {
		return
	}
	// Not every ResponseWriter (httptest's recorder) supports deadlines.
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		st.err = err
		return
	}
	_, st.err = fmt.Fprintf(st.w, format, args...)
}

// event writes one event of type typ with v as JSON. JSON has no raw
// newlines, so the data is one line.
func (st *stream) event(typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		if st.err == nil {
			st.err = err
		}
		return
	}
	st.printf("event: %s\ndata: %s\n\n", typ, b)
}

func (st *stream) flush() error {
	if st.err == nil {
		st.err = st.rc.Flush()
	}
	return st.err
}

// sortItems orders items by delivery, oldest first.
func sortItems(items []api.Item) {
	slices.SortStableFunc(items, func(a, b api.Item) int { return a.Delivered.Compare(b.Delivered) })
}
