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
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/internal/gcfloor"
	"github.com/meshd/meshd/node"
	"github.com/meshd/meshd/node/control"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/promexport"
	"github.com/meshd/meshd/node/statuspage"
)

const usage = `usage: meshd [--home DIR] [FLAGS]
       meshd version

meshd is the mesh node daemon. A node keeps its identity, roster and
sockets in its home directory (--home, env MESH_HOME, default ~/.meshd).
On first run it creates an identity and, without a roster, a one-node org
with itself as admin; 'meshctl join TOKEN' joins an existing org instead.
Such a fresh node knocks at a --seed of another org: that org's admins see
it in 'meshctl roster pending', and once they add it and publish, meshd
adopts their org (the one-node org is moved aside) and starts again in it.

Configuration precedence: config file < environment (MESH_*) < flags.

flags:
`

const usageExamples = `
examples:
  meshd                                         run on the defaults (~/.meshd, port 7437, mDNS)
  meshd --home /srv/agent1 --seed tcp://10.0.0.5:7437
  meshd --listen tcp://127.0.0.1:0 --no-mdns    a private node for a test
  meshd --print-config                          check the configuration in force, print it as JSON
  meshctl --home /srv/agent1 status             talk to it (see meshctl help)
`

// flagPlaceholders name the value of each string flag in the help.
var flagPlaceholders = map[string]string{
	"home": "DIR", "config": "FILE", "roster": "FILE", "name": "NAME", "org": "ORG",
	"http": "HOST:PORT", "metrics": "HOST:PORT", "log-format": "FORMAT", "log-level": "LEVEL",
	"mdns-interface": "IFACE", "mailbox-group": "GROUP", "keepalive": "D", "idle-timeout": "D",
	"presence-ttl": "D", "archive-retention": "D", "retention-interval": "D",
	"sync-timeout": "D", "peer-exchange-interval": "D",
}

// printUsage prints meshd's help as meshctl prints its own: double-dash
// flags, their values and defaults, then examples.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fs.VisitAll(func(fl *flag.Flag) {
		arg, help := flag.UnquoteUsage(fl)
		switch arg {
		case "value":
			arg = "ADDR"
		case "int":
			arg = "N"
		case "string":
			arg = flagPlaceholders[fl.Name]
			if arg == "" {
				arg = "VALUE"
			}
		}
		name := "--" + fl.Name
		if arg != "" {
			name += " " + arg
		}
		if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
			help += " (default " + d + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, help)
	})
	tw.Flush()
	fmt.Fprint(w, usageExamples)
}

func main() {
	if os.Getenv("GOGC") == "" { // GOGC set says how to collect; the floor stays out of it
		gcfloor.Start(gcfloor.DefaultBytes)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	if code == codeAdopted {
		// The home now holds the org this node adopted: start again in it.
		code = reexec()
	}
	os.Exit(code)
}

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
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, f.fs)
			return 0
		}
		// The flag package names flags with one dash; meshd's help uses two.
		fmt.Fprintf(stderr, "meshd: %s\n\n", strings.Replace(err.Error(), ": -", ": --", 1))
		printUsage(stderr, f.fs)
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
	// --print-config checks everything meshd checks before it opens the
	// home, so that a config it prints is one meshd would run with.
	ncfg, log, code := validate(cfg, stderr)
	if code != 0 {
		return code
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
		case errors.Is(err, syscall.EADDRINUSE):
			fmt.Fprintf(stderr, "hint: another program (perhaps another meshd) listens on that port: give this node a port of its own (--listen tcp://:7438), or --listen tcp://:0 for any free one, which peers learn by themselves; see \"Several nodes on one host\" in the README\n")
		}
		return 1
	}
	// The control socket meshctl talks to; up before "ready".
	ctl, err := control.Serve(n.ControlSocket(), n.Backend(), log.With("component", "control"))
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		n.Close()
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
		if page, err = statuspage.New(n.Backend(), pcfg); err == nil {
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
			ctl.Close()
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
		metrics, err = promexport.Serve(context.Background(), n.Backend(),
			promexport.Config{Addr: cfg.Metrics, AllowRemote: cfg.MetricsAllowRemote, Logger: log})
		if err != nil {
			fmt.Fprintf(stderr, "meshd: --metrics: %v\n", err)
			if page != nil {
				page.Close()
			}
			ctl.Close()
			n.Close()
			return 1
		}
	}
	fmt.Fprintf(stderr, "meshd: ready. Next, in another terminal: %s --home %s status\n", meshctlCommand(), cfg.Home)
	if page != nil {
		fmt.Fprintf(stderr, "meshd: the status page opens at the address that meshctl --home %s ui prints\n", cfg.Home)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	var adopted *join.Adoption
wait:
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				if err := n.ReloadRosterFile(); err != nil {
					log.Warn("roster reload refused", "err", err)
				}
				continue
			}
			log.Info("shutting down", "signal", s.String())
			break wait
		case ad := <-n.Backend().Adopted():
			log.Info("adopting org: stopping, to start again in it", "org", ad.Roster.Org, "left", ad.Left)
			adopted = &ad
			break wait
		}
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
		if err := ctl.Close(); err != nil {
			log.Warn("control socket shutdown", "err", err)
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
	if adopted != nil {
		return finishAdoption(cfg.Home, *adopted, log, stderr)
	}
	log.Info("stopped")
	return 0
}

// codeAdopted is what run returns when the node adopted an org: main
// starts meshd again, with the same arguments, in the adopted org.
const codeAdopted = -1

// finishAdoption moves the one-node org aside and installs the adopted
// roster (join.FinishAdoption), then has main start meshd again.
func finishAdoption(dir string, ad join.Adoption, log *slog.Logger, stderr io.Writer) int {
	left, err := join.FinishAdoption(dir, ad)
	if err != nil {
		fmt.Fprintf(stderr, "meshd: adopting org %q: %v\n", ad.Roster.Org, err)
		return 1
	}
	log.Info("adopted org: the one-node org's roster, history and mailbox were moved aside; starting again",
		"org", ad.Roster.Org, "roster_version", ad.Roster.Version, "from", ad.From, "left_dir", left)
	return codeAdopted
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

// validate checks a resolved configuration as meshd does before it opens
// the home: every key's value, the log settings, --http and --metrics. On
// an error it writes it (and a hint) to stderr and returns exit code 2.
func validate(cfg fileConfig, stderr io.Writer) (node.Config, *slog.Logger, int) {
	ncfg, log, err := nodeConfig(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "meshd: %v\n", err)
		return ncfg, nil, 2
	}
	if cfg.HTTP != "" {
		if err := statuspage.CheckAddr(cfg.HTTP, cfg.HTTPAllowRemote); err != nil {
			fmt.Fprintf(stderr, "meshd: --http: %v\n", err)
			if errors.Is(err, statuspage.ErrNotLoopback) {
				fmt.Fprintf(stderr, "hint: use a loopback address like 127.0.0.1:8080, or add --http-allow-remote\n")
			}
			return ncfg, nil, 2
		}
	}
	if cfg.Metrics != "" {
		if err := promexport.CheckAddr(cfg.Metrics, cfg.MetricsAllowRemote); err != nil {
			fmt.Fprintf(stderr, "meshd: --metrics: %v\n", err)
			if errors.Is(err, promexport.ErrNotLoopback) {
				fmt.Fprintf(stderr, "hint: use a loopback address like 127.0.0.1:9464, or add --metrics-allow-remote\n")
			}
			return ncfg, nil, 2
		}
	}
	return ncfg, log, 0
}

// meshctlCommand is how to run meshctl from here: its name when it is on
// PATH, else the go run line that works from the source tree (where
// 'go run ./cmd/meshd' was typed).
func meshctlCommand() string {
	if _, err := exec.LookPath("meshctl"); err == nil {
		return "meshctl"
	}
	if _, err := os.Stat(filepath.Join("cmd", "meshctl")); err == nil {
		return "go run ./cmd/meshctl"
	}
	return "meshctl"
}
