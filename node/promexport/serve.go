package promexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshd/meshd/node/localhttp"
)

// ErrNotLoopback is returned by [CheckAddr] and [Serve] for an address
// that is not on a loopback interface when [Config.AllowRemote] is off.
// The endpoint has no authentication, and the counters say a good deal
// about the mesh (who links, how much traffic, what gets dropped).
var ErrNotLoopback = errors.New("not a loopback address")

// Config says where and how to serve the metrics endpoint.
type Config struct {
	// Addr is the HOST:PORT to listen on, like 127.0.0.1:9464. Port 0
	// picks a free port; [Server.Addr] tells which.
	Addr string
	// AllowRemote permits a non-loopback Addr. Off by default: see
	// [ErrNotLoopback].
	AllowRemote bool
	// Logger receives the bound address and scrape errors; nil discards.
	Logger *slog.Logger
}

// Timeouts of the metrics HTTP server. A scrape is one small GET; these
// only bound clients that hold connections open.
const (
	readHeaderTimeout = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	// shutdownGrace is how long Close lets a scrape in flight finish.
	shutdownGrace = 5 * time.Second
	// maxInFlight bounds concurrent scrapes: each one walks the node's
	// counters and reads the history store's count buckets.
	maxInFlight = 4
)

// CheckAddr reports whether addr is a HOST:PORT the endpoint may listen
// on: a loopback IP or "localhost", or anything when allowRemote is set.
// An empty host means every interface, which is not loopback.
func CheckAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address %q: want HOST:PORT, like 127.0.0.1:9464: %w", addr, err)
	}
	if allowRemote || isLoopbackHost(host) {
		return nil
	}
	return fmt.Errorf("metrics address %q: %w (the endpoint has no authentication)", addr, ErrNotLoopback)
}

func isLoopbackHost(host string) bool { return localhttp.IsLoopbackHost(host) }

// Server is a running metrics endpoint serving GET /metrics. Stop it with
// [Server.Close].
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when the serve goroutine returns

	stop      func() bool // unregisters the watcher of Serve's ctx
	closeOnce sync.Once
	closeErr  error // written once under closeOnce
}

// Serve listens on cfg.Addr and serves src's metrics at /metrics from a
// private registry (see [NewRegistry]) until [Server.Close] is called or
// ctx ends. It returns once the listener is bound, so a bad address or a
// busy port is reported here.
func Serve(ctx context.Context, src Source, cfg Config) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = discard()
	}
	if err := CheckAddr(cfg.Addr, cfg.AllowRemote); err != nil {
		return nil, err
	}
	reg, err := NewRegistry(src)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	// "localhost" is resolved by the system; check where it really bound.
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !cfg.AllowRemote && !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("metrics address %q bound to %s: %w", cfg.Addr, ta, ErrNotLoopback)
	}
	s := &Server{ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(reg, log))
	s.srv = &http.Server{
		// The Host check keeps a web page from reading the counters
		// through DNS rebinding, as for the status page.
		Handler:           localhttp.HostGuard(mux, cfg.AllowRemote, "the metrics endpoint"),
		ReadHeaderTimeout: readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "err", err)
		}
	}()
	s.stop = context.AfterFunc(ctx, s.shutdown)
	log.Info("metrics endpoint listening", "addr", ln.Addr().String(), "path", "/metrics")
	return s, nil
}

// Handler returns the /metrics handler for reg. Collection errors are
// logged to log (nil discards) and the metrics that could be gathered are
// still served.
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if log == nil {
		log = discard()
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            errorLog{log},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: maxInFlight,
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// errorLog adapts a slog.Logger to promhttp.Logger.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) { e.log.Warn("metrics scrape", "err", fmt.Sprint(v...)) }

// Addr returns the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the endpoint: it lets a scrape in flight finish (for a few
// seconds at most), closes the listener and waits for the serving
// goroutine. It is idempotent and safe to call concurrently.
func (s *Server) Close() error {
	s.stop()
	s.shutdown()
	return s.closeErr
}

// shutdown does Close's work once; it also runs when Serve's ctx ends.
func (s *Server) shutdown() {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.closeErr = s.srv.Close()
		}
		<-s.done
	})
}
