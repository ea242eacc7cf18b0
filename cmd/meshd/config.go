package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// fileConfig is meshd's configuration: the TOML file's keys, which are
// also the flags' names (with '-' for '_'). Precedence: file < env < flags.
type fileConfig struct {
	Home          string   `toml:"home" json:"home"`
	Name          string   `toml:"name" json:"name"`
	Org           string   `toml:"org" json:"org"`
	Roster        string   `toml:"roster" json:"roster"`
	Listen        []string `toml:"listen" json:"listen"`
	NoUnix        bool     `toml:"no_unix" json:"no_unix"`
	Seeds         []string `toml:"seeds" json:"seeds"`
	NoMDNS        bool     `toml:"no_mdns" json:"no_mdns"`
	MDNSInterface string   `toml:"mdns_interface" json:"mdns_interface"`
	PresenceTTL   string   `toml:"presence_ttl" json:"presence_ttl"`
	// Link timers: a link idle for Keepalive sends a ping; one that hears
	// nothing for IdleTimeout is closed and redialled.
	Keepalive   string `toml:"keepalive" json:"keepalive"`
	IdleTimeout string `toml:"idle_timeout" json:"idle_timeout"`
	// History: how long an archive node keeps channel history at least,
	// how often retention runs, how many peers a catch-up round asks.
	ArchiveRetention  string `toml:"archive_retention" json:"archive_retention"`
	RetentionInterval string `toml:"retention_interval" json:"retention_interval"`
	SyncPeers         int    `toml:"sync_peers" json:"sync_peers"`
	// CompactAtStartMiB: a history store of at least this many MiB that is
	// at least half free pages is compacted at start; 0 never.
	CompactAtStartMiB int    `toml:"compact_at_start_mib" json:"compact_at_start_mib"`
	LogLevel          string `toml:"log_level" json:"log_level"`
	LogFormat         string `toml:"log_format" json:"log_format"`
	// HTTP is the address of the read-only status page (HOST:PORT, empty:
	// none); beyond loopback only with HTTPAllowRemote.
	HTTP            string `toml:"http" json:"http"`
	HTTPAllowRemote bool   `toml:"http_allow_remote" json:"http_allow_remote"`
	// Metrics is the address of the Prometheus endpoint (HOST:PORT,
	// empty: none); beyond loopback only with MetricsAllowRemote.
	Metrics            string `toml:"metrics" json:"metrics"`
	MetricsAllowRemote bool   `toml:"metrics_allow_remote" json:"metrics_allow_remote"`
}

// DefaultListen is the TCP address a node listens on when none is given.
const DefaultListen = "tcp://0.0.0.0:7437"

func defaultFileConfig() fileConfig {
	return fileConfig{Listen: []string{DefaultListen}, PresenceTTL: "5m", Keepalive: "5s", IdleTimeout: "15s", LogLevel: "info", LogFormat: "text",
		ArchiveRetention: "720h", RetentionInterval: "1m", SyncPeers: 3, CompactAtStartMiB: 64}
}

// loadFile reads a TOML config; unknown keys are an error naming the key and line.
func loadFile(path string, c *fileConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			var msgs []string
			for _, e := range sm.Errors {
				row, _ := e.Position()
				msgs = append(msgs, fmt.Sprintf("unknown key %q at line %d", strings.Join(e.Key(), "."), row))
			}
			return fmt.Errorf("config %s: %s", path, strings.Join(msgs, "; "))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return fmt.Errorf("config %s: line %d column %d: %s", path, row, col, de.Error())
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// applyEnv overrides c from MESH_* variables.
func applyEnv(c *fileConfig, getenv func(string) string) error {
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	list := func(name string, dst *[]string) {
		if v := getenv(name); v != "" {
			*dst = splitList(v)
		}
	}
	boolean := func(name string, dst *bool) error {
		if v := getenv(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", name, v)
			}
			*dst = b
		}
		return nil
	}
	str("MESH_HOME", &c.Home)
	str("MESH_NAME", &c.Name)
	str("MESH_ORG", &c.Org)
	str("MESH_ROSTER", &c.Roster)
	list("MESH_LISTEN", &c.Listen)
	list("MESH_SEEDS", &c.Seeds)
	str("MESH_MDNS_INTERFACE", &c.MDNSInterface)
	str("MESH_PRESENCE_TTL", &c.PresenceTTL)
	str("MESH_KEEPALIVE", &c.Keepalive)
	str("MESH_IDLE_TIMEOUT", &c.IdleTimeout)
	str("MESH_ARCHIVE_RETENTION", &c.ArchiveRetention)
	str("MESH_RETENTION_INTERVAL", &c.RetentionInterval)
	if v := getenv("MESH_SYNC_PEERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("MESH_SYNC_PEERS=%q: want a number", v)
		}
		c.SyncPeers = n
	}
	if v := getenv("MESH_COMPACT_AT_START_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("MESH_COMPACT_AT_START_MIB=%q: want a number", v)
		}
		c.CompactAtStartMiB = n
	}
	str("MESH_LOG_LEVEL", &c.LogLevel)
	str("MESH_LOG_FORMAT", &c.LogFormat)
	str("MESH_HTTP", &c.HTTP)
	if err := boolean("MESH_HTTP_ALLOW_REMOTE", &c.HTTPAllowRemote); err != nil {
		return err
	}
	str("MESH_METRICS", &c.Metrics)
	if err := boolean("MESH_METRICS_ALLOW_REMOTE", &c.MetricsAllowRemote); err != nil {
		return err
	}
	if err := boolean("MESH_NO_MDNS", &c.NoMDNS); err != nil {
		return err
	}
	return boolean("MESH_NO_UNIX", &c.NoUnix)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// flagValues holds parsed flags; set records which were given.
type flagValues struct {
	fs          *flag.FlagSet
	cfg         fileConfig
	listen      listFlag
	seeds       listFlag
	configPath  string
	printConfig bool
	showVersion bool
}

func newFlags() *flagValues {
	f := &flagValues{fs: flag.NewFlagSet("meshd", flag.ContinueOnError)}
	fs := f.fs
	fs.StringVar(&f.cfg.Home, "home", "", "home directory (env MESH_HOME; default ~/.meshd)")
	fs.StringVar(&f.cfg.Name, "name", "", "display name used when creating the identity or a one-node org")
	fs.StringVar(&f.cfg.Org, "org", "", "org id for a new one-node org (default org-<fingerprint>)")
	fs.StringVar(&f.cfg.Roster, "roster", "", "pinned roster file (env MESH_ROSTER)")
	fs.Var(&f.listen, "listen", "listen address tcp://HOST:PORT or unix:///PATH (repeatable; default "+DefaultListen+")")
	fs.BoolVar(&f.cfg.NoUnix, "no-unix", false, "do not listen on the link socket in the home")
	fs.Var(&f.seeds, "seed", "static seed peer tcp://HOST:PORT or unix:///PATH (repeatable)")
	fs.BoolVar(&f.cfg.NoMDNS, "no-mdns", false, "disable mDNS discovery")
	fs.StringVar(&f.cfg.MDNSInterface, "mdns-interface", "", "network interface for mDNS (default: first multicast interface)")
	fs.StringVar(&f.cfg.PresenceTTL, "presence-ttl", "", "silence after which a peer is shown offline (default 5m)")
	fs.StringVar(&f.cfg.Keepalive, "keepalive", "", "ping a link after this long without sending on it (default 5s)")
	fs.StringVar(&f.cfg.IdleTimeout, "idle-timeout", "", "close a link that has heard nothing for this long, at least twice --keepalive (default 15s)")
	fs.StringVar(&f.cfg.ArchiveRetention, "archive-retention", "", "how long an archive node (roster archive flag) keeps channel history at least (default 720h)")
	fs.StringVar(&f.cfg.RetentionInterval, "retention-interval", "", "how often history retention runs (default 1m)")
	fs.IntVar(&f.cfg.SyncPeers, "sync-peers", 0, "how many linked readers a history catch-up asks per channel (default 3)")
	fs.IntVar(&f.cfg.CompactAtStartMiB, "compact-at-start-mib", 0, "compact a history store of at least this many MiB that is half free pages at start; 0 never (default 64)")
	fs.StringVar(&f.cfg.LogLevel, "log-level", "", "debug, info, warn or error (default info)")
	fs.StringVar(&f.cfg.LogFormat, "log-format", "", "text or json (default text)")
	fs.StringVar(&f.cfg.HTTP, "http", "", "serve the read-only status page on HOST:PORT, loopback only; open it with meshctl ui (env MESH_HTTP)")
	fs.BoolVar(&f.cfg.HTTPAllowRemote, "http-allow-remote", false, "let --http listen beyond loopback: the token and the messages cross the network in plain HTTP")
	fs.StringVar(&f.cfg.Metrics, "metrics", "", "serve Prometheus metrics at http://HOST:PORT/metrics, loopback only (env MESH_METRICS)")
	fs.BoolVar(&f.cfg.MetricsAllowRemote, "metrics-allow-remote", false, "let --metrics listen beyond loopback: the endpoint has no authentication")
	fs.StringVar(&f.configPath, "config", "", "TOML config file (env MESH_CONFIG; default <home>/meshd.toml if present)")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the effective configuration as JSON and exit")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	return f
}

// applyFlags overrides c with the flags that were given.
func (f *flagValues) applyFlags(c *fileConfig) {
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "home":
			c.Home = f.cfg.Home
		case "name":
			c.Name = f.cfg.Name
		case "org":
			c.Org = f.cfg.Org
		case "roster":
			c.Roster = f.cfg.Roster
		case "listen":
			c.Listen = f.listen
		case "no-unix":
			c.NoUnix = f.cfg.NoUnix
		case "seed":
			c.Seeds = f.seeds
		case "no-mdns":
			c.NoMDNS = f.cfg.NoMDNS
		case "mdns-interface":
			c.MDNSInterface = f.cfg.MDNSInterface
		case "presence-ttl":
			c.PresenceTTL = f.cfg.PresenceTTL
		case "keepalive":
			c.Keepalive = f.cfg.Keepalive
		case "idle-timeout":
			c.IdleTimeout = f.cfg.IdleTimeout
		case "archive-retention":
			c.ArchiveRetention = f.cfg.ArchiveRetention
		case "retention-interval":
			c.RetentionInterval = f.cfg.RetentionInterval
		case "sync-peers":
			c.SyncPeers = f.cfg.SyncPeers
		case "compact-at-start-mib":
			c.CompactAtStartMiB = f.cfg.CompactAtStartMiB
		case "log-level":
			c.LogLevel = f.cfg.LogLevel
		case "log-format":
			c.LogFormat = f.cfg.LogFormat
		case "http":
			c.HTTP = f.cfg.HTTP
		case "http-allow-remote":
			c.HTTPAllowRemote = f.cfg.HTTPAllowRemote
		case "metrics":
			c.Metrics = f.cfg.Metrics
		case "metrics-allow-remote":
			c.MetricsAllowRemote = f.cfg.MetricsAllowRemote
		}
	})
}
