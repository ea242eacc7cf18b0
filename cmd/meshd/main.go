// Command meshd is the mesh node daemon. See `meshd -h`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/promexport"
	"github.com/meshd/meshd/node/statuspage"
)

const usage = `meshd: the mesh node daemon

Usage:
  meshd [flags]          run a node
  meshd version          print the version

A node keeps its identity, roster and sockets in its home directory
(--home, env MESH_HOME, default ~/.meshd). On first run it creates an
identity and, without a roster, a one-node org with itself as admin.

Configuration precedence: config file < environment (MESH_*) < flags.

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv)) }

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
	}
	return "devel"
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprintf(stdout, "meshd %s\n", version())
		return 0
	}
	f := newFlags()
	f.fs.SetOutput(stderr)
	f.fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		f.fs.PrintDefaults()
	}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "meshd: unexpected argument %q\n", f.fs.Arg(0))
		return 2
	}
	if f.showVersion {
		fmt.Fprintf(stdout, "meshd %s\n", version())
		return 0
	}

	cfg, err := resolveConfig(f, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		return 2
	}
	if f.printConfig {
		b, err := printConfig(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "meshd: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	ncfg, log, err := nodeConfig(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		return 2
	}
	if cfg.HTTP != "" {
		if err := statuspage.CheckAddr(cfg.HTTP, cfg.HTTPAllowRemote); err != nil {
			fmt.Fprintf(stderr, "meshd: --http: %v\n", err)
			if errors.Is(err, statuspage.ErrNotLoopback) {
				fmt.Fprintf(stderr, "hint: use a loopback address like 127.0.0.1:8080, or add --http-allow-remote\n")
			}
			return 2
		}
	}
	if cfg.Metrics != "" {
		if err := promexport.CheckAddr(cfg.Metrics, cfg.MetricsAllowRemote); err != nil {
			fmt.Fprintf(stderr, "meshd: --metrics: %v\n", err)
			if errors.Is(err, promexport.ErrNotLoopback) {
				fmt.Fprintf(stderr, "hint: use a loopback address like 127.0.0.1:9464, or add --metrics-allow-remote\n")
			}
			return 2
		}
	}
	// The home holds the key and the mailbox every DM: check who may get
	// in before using it (see home.Secure for what is refused and what
	// is repaired).
	acc := ncfg.MailboxAccess
	repaired, err := home.Open(ncfg.Home).Secure(home.Sharing{GroupID: acc.GroupID, GroupSet: acc.GroupSet})
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		return 1
	}
	for _, r := range repaired {
		log.Warn("permissions repaired: the home and the mailbox are for this user only (or the mailbox group)", "what", r)
	}
	n, err := node.New(ncfg)
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		switch {
		case errors.Is(err, home.ErrLocked):
			fmt.Fprintf(stderr, "hint: stop the other meshd, or use another --home\n")
		case errors.Is(err, history.ErrNewerFormat):
			fmt.Fprintf(stderr, "hint: run the newer meshd that wrote it, or move it aside and rebuild it from the mailbox: meshctl --home %s repair\n", cfg.Home)
		case errors.Is(err, history.ErrCorrupt):
			fmt.Fprintf(stderr, "hint: move it aside and rebuild it from the mailbox: meshctl --home %s repair\n", cfg.Home)
		}
		return 1
	}
	r := n.Roster()
	log.Info("meshd running", "version", version(), "key", n.Identity().String(),
		"fingerprint", n.Identity().Fingerprint(), "org", r.Org, "roster_version", r.Version,
		"listen", n.ListenAddrs(), "control", n.ControlSocket())
	// A URL file left by a meshd that died holds a dead token; this one
	// writes its own, if it serves the page.
	if err := statuspage.RemoveURLFile(cfg.Home); err != nil {
		log.Warn("status page", "err", err)
	}
	var page *statuspage.Server
	if cfg.HTTP != "" {
		pcfg := statuspage.DefaultConfig()
		pcfg.Addr, pcfg.AllowRemote, pcfg.Logger = cfg.HTTP, cfg.HTTPAllowRemote, log
		if page, err = statuspage.New(n, pcfg); err == nil {
			err = page.Start()
		}
		if err == nil {
			// The login URL is a secret: it goes to the owner-only file
			// for `meshctl ui`, never to the log (a journal may be
			// readable by a group).
			err = statuspage.WriteURLFile(cfg.Home, page.LoginURL())
		}
		if err != nil {
			fmt.Fprintf(stderr, "meshd: %v\n", err)
			if page != nil {
				page.Close()
			}
			n.Close()
			return 1
		}
		defer func() {
			if err := statuspage.RemoveURLFile(cfg.Home); err != nil {
				log.Warn("status page", "err", err)
			}
		}()
		log.Info("status page (open it with the address `meshctl ui` prints)", "url", page.URL(),
			"ui", fmt.Sprintf("meshctl --home %s ui", cfg.Home))
	}
	var metrics *promexport.Server
	if cfg.Metrics != "" {
		// Serve logs the bound address ("metrics endpoint listening").
		metrics, err = promexport.Serve(context.Background(), n,
			promexport.Config{Addr: cfg.Metrics, AllowRemote: cfg.MetricsAllowRemote, Logger: log})
		if err != nil {
			fmt.Fprintf(stderr, "meshd: --metrics: %v\n", err)
			if page != nil {
				page.Close()
			}
			n.Close()
			return 1
		}
	}
	fmt.Fprintf(stderr, "meshd: ready. Next, in another terminal: meshctl --home %s status\n", cfg.Home)
	if page != nil {
		fmt.Fprintf(stderr, "meshd: the status page opens at the address that meshctl --home %s ui prints\n", cfg.Home)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	for s := range sig {
		if s == syscall.SIGHUP {
			if err := n.ReloadRosterFile(); err != nil {
				log.Warn("roster reload refused", "err", err)
			}
			continue
		}
		log.Info("shutting down", "signal", s.String())
		break
	}
	// Shutdown is bounded: whatever a component waits on (a peer, a
	// disk, a file in the outbox), meshd exits within shutdownTimeout of
	// the signal, or at once on a second one. The history store commits
	// each batch before it is acknowledged, so an exit cut short loses
	// nothing that was stored.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if page != nil {
			page.Close()
		}
		if metrics != nil {
			if err := metrics.Close(); err != nil {
				log.Warn("metrics endpoint shutdown", "err", err)
			}
		}
		if err := n.Close(); err != nil {
			log.Warn("shutdown", "err", err)
		}
	}()
	timeout := time.NewTimer(shutdownTimeout)
	defer timeout.Stop()
	for done := false; !done; {
		select {
		case <-stopped:
			done = true
		case <-timeout.C:
			log.Error("shutdown did not finish in time; exiting", "after", shutdownTimeout)
			return 1
		case s := <-sig:
			if s == syscall.SIGHUP {
				continue
			}
			log.Error("second signal during shutdown; exiting", "signal", s.String())
			return 1
		}
	}
	log.Info("stopped")
	return 0
}

// shutdownTimeout bounds the wait for an orderly shutdown after SIGTERM or
// SIGINT; systemd's default stop timeout is 90 s.
const shutdownTimeout = 20 * time.Second

// resolveConfig merges defaults, the config file, env and flags.
func resolveConfig(f *flagValues, getenv func(string) string) (fileConfig, error) {
	cfg := defaultFileConfig()
	homeDir := home.Resolve(f.cfg.Home) // flag, else MESH_HOME, else ~/.meshd
	path := f.configPath
	if path == "" {
		path = getenv("MESH_CONFIG")
	}
	explicit := path != ""
	if path == "" {
		path = filepath.Join(homeDir, "meshd.toml")
	}
	if _, err := os.Stat(path); err == nil || explicit {
		if err := loadFile(path, &cfg); err != nil {
			return cfg, err
		}
	}
	if err := applyEnv(&cfg, getenv); err != nil {
		return cfg, err
	}
	f.applyFlags(&cfg)
	if cfg.Home == "" {
		cfg.Home = homeDir
	}
	abs, err := filepath.Abs(cfg.Home)
	if err != nil {
		return cfg, err
	}
	cfg.Home = abs
	return cfg, nil
}

func nodeConfig(c fileConfig, stderr io.Writer) (node.Config, *slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return node.Config{}, nil, fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch c.LogFormat {
	case "text", "":
		h = slog.NewTextHandler(stderr, opts)
	case "json":
		h = slog.NewJSONHandler(stderr, opts)
	default:
		return node.Config{}, nil, fmt.Errorf("log format %q: want text or json", c.LogFormat)
	}
	log := slog.New(h)
	nc := node.DefaultConfig()
	nc.Logger = log
	for i := range configKeys {
		if k := &configKeys[i]; k.apply != nil {
			if err := k.apply(&c, &nc); err != nil {
				return nc, nil, err
			}
		}
	}
	return nc, log, nil
}
