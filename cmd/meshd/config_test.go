package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func resolve(t *testing.T, args []string, env map[string]string) (fileConfig, error) {
	t.Helper()
	f := newFlags()
	if err := f.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return resolveConfig(f, envOf(env))
}

func TestConfigPrecedence(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "meshd.toml")
	err := os.WriteFile(cfgPath, []byte(`
home = "`+dir+`/fromfile"
name = "file-name"
listen = ["tcp://127.0.0.1:1111"]
seeds = ["tcp://10.0.0.1:7437"]
log_level = "debug"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// File only.
	c, err := resolve(t, []string{"--config", cfgPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "file-name" || !reflect.DeepEqual(c.Listen, []string{"tcp://127.0.0.1:1111"}) || c.LogLevel != "debug" {
		t.Fatalf("file config not applied: %+v", c)
	}
	// Env beats file.
	c, err = resolve(t, []string{"--config", cfgPath}, map[string]string{"MESH_NAME": "env-name", "MESH_LISTEN": "tcp://127.0.0.1:2222,unix:///tmp/x.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "env-name" || len(c.Listen) != 2 || c.Listen[0] != "tcp://127.0.0.1:2222" {
		t.Fatalf("env did not override file: %+v", c)
	}
	if c.LogLevel != "debug" {
		t.Fatalf("unrelated file key lost: %+v", c)
	}
	// Flags beat env.
	c, err = resolve(t, []string{"--config", cfgPath, "--name", "flag-name", "--listen", "tcp://127.0.0.1:3333"},
		map[string]string{"MESH_NAME": "env-name", "MESH_LISTEN": "tcp://127.0.0.1:2222"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "flag-name" || !reflect.DeepEqual(c.Listen, []string{"tcp://127.0.0.1:3333"}) {
		t.Fatalf("flags did not override env: %+v", c)
	}
	// MESH_CONFIG finds the file; home from the file is absolute.
	c, err = resolve(t, nil, map[string]string{"MESH_CONFIG": cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home != filepath.Join(dir, "fromfile") {
		t.Fatalf("home = %q", c.Home)
	}
	// Defaults.
	c, err = resolve(t, []string{"--home", filepath.Join(dir, "nofile")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Listen, []string{DefaultListen}) || c.NoMDNS || c.LogLevel != "info" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestConfigUnknownKeyNamesKeyAndLine(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "meshd.toml")
	os.WriteFile(p, []byte("name = \"x\"\n\nlisten_addr = \"tcp://:1\"\n"), 0o600)
	_, err := resolve(t, []string{"--config", p}, nil)
	if err == nil || !strings.Contains(err.Error(), `"listen_addr"`) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want unknown key listen_addr at line 3", err)
	}
	os.WriteFile(p, []byte("name = \n"), 0o600)
	if _, err := resolve(t, []string{"--config", p}, nil); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("syntax error: %v", err)
	}
	if _, err := resolve(t, []string{"--config", filepath.Join(dir, "missing.toml")}, nil); err == nil {
		t.Fatal("explicit missing config accepted")
	}
	if _, err := resolve(t, nil, map[string]string{"MESH_NO_MDNS": "maybe"}); err == nil {
		t.Fatal("bad boolean env accepted")
	}
}

func TestConfigLinkTimers(t *testing.T) {
	testpar.Parallel(t)
	home := filepath.Join(t.TempDir(), "h")
	c, err := resolve(t, []string{"--home", home}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, _, err := nodeConfig(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Transport.KeepaliveInterval != 15*time.Second || nc.Transport.IdleTimeout != 45*time.Second || nc.PeerExchangeInterval != 30*time.Second {
		t.Fatalf("default timers: keepalive %v idle %v peer exchange %v", nc.Transport.KeepaliveInterval, nc.Transport.IdleTimeout, nc.PeerExchangeInterval)
	}
	c, err = resolve(t, []string{"--home", home, "--keepalive", "20s", "--peer-exchange-interval", "2s"}, map[string]string{"MESH_IDLE_TIMEOUT": "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if nc, _, err = nodeConfig(c, io.Discard); err != nil {
		t.Fatal(err)
	}
	if nc.Transport.KeepaliveInterval != 20*time.Second || nc.Transport.IdleTimeout != time.Minute || nc.PeerExchangeInterval != 2*time.Second {
		t.Fatalf("set timers: keepalive %v idle %v peer exchange %v", nc.Transport.KeepaliveInterval, nc.Transport.IdleTimeout, nc.PeerExchangeInterval)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "10ms"}, "keepalive"},
		{[]string{"--keepalive", "soon"}, "keepalive"},
		{[]string{"--idle-timeout", "8s"}, "at least twice the keepalive"},
		{[]string{"--peer-exchange-interval", "100ms"}, "peer exchange interval"},
	} {
		c, err := resolve(t, append([]string{"--home", home}, bad.args...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := nodeConfig(c, io.Discard); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: err %v, want one that says %q", bad.args, err, bad.want)
		}
	}
}

// TestConfigTable checks the table of keys itself: each field of
// fileConfig belongs to exactly one key, each default has its field's type,
// and names are unique.
func TestConfigTable(t *testing.T) {
	testpar.Parallel(t)
	var c fileConfig
	fields := map[uintptr]string{}
	names := map[string]string{}
	for i := range configKeys {
		k := &configKeys[i]
		p := reflect.ValueOf(k.field(&c))
		if p.Kind() != reflect.Pointer {
			t.Fatalf("%s: field is a %s, not a pointer", k.key, p.Kind())
		}
		if other, ok := fields[p.Pointer()]; ok {
			t.Errorf("%s and %s share a field", k.key, other)
		}
		fields[p.Pointer()] = k.key
		if reflect.TypeOf(k.def) != p.Type().Elem() {
			t.Errorf("%s: default %T for a field of type %s", k.key, k.def, p.Type().Elem())
		}
		for _, n := range []string{"key " + k.key, "env " + k.envName(), "flag " + k.flagName()} {
			if other, ok := names[n]; ok {
				t.Errorf("%s: %s is also %s's", k.key, n, other)
			}
			names[n] = k.key
		}
		if k.help == "" {
			t.Errorf("%s: no help", k.key)
		}
	}
	if n := reflect.TypeFor[fileConfig]().NumField(); n != len(fields) {
		t.Errorf("fileConfig has %d fields, the table %d keys", n, len(fields))
	}
}

// TestConfigPrecedenceEveryKey sets every key in the file, the environment
// and the flags, to different values, and checks which wins.
func TestConfigPrecedenceEveryKey(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	// Three values a key, one for each source, in the key's type.
	value := func(k *configKey, n int) (toml, text string) {
		switch k.def.(type) {
		case string:
			s := fmt.Sprintf("%s-%d", k.key, n)
			return strconv.Quote(s), s
		case []string:
			s := fmt.Sprintf("tcp://192.0.2.%d:7437", n)
			return "[" + strconv.Quote(s) + "]", s
		case bool:
			return strconv.FormatBool(n%2 == 1), strconv.FormatBool(n%2 == 1)
		case int:
			return strconv.Itoa(100 + n), strconv.Itoa(100 + n)
		}
		t.Fatalf("%s: type %T", k.key, k.def)
		return "", ""
	}
	for _, sources := range []int{1, 2, 3} { // file; file and env; file, env and flags
		var file strings.Builder
		env := map[string]string{}
		var args []string
		for i := range configKeys {
			k := &configKeys[i]
			if k.key == "home" {
				continue // home moves the default config file; checked apart
			}
			tv, _ := value(k, 1)
			fmt.Fprintf(&file, "%s = %s\n", k.key, tv)
			if sources >= 2 {
				_, env[k.envName()] = value(k, 2)
			}
			if sources >= 3 {
				_, v := value(k, 3)
				args = append(args, "--"+k.flagName()+"="+v)
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("c%d.toml", sources))
		if err := os.WriteFile(p, []byte(file.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := resolve(t, append([]string{"--config", p}, args...), env)
		if err != nil {
			t.Fatal(err)
		}
		for i := range configKeys {
			k := &configKeys[i]
			if k.key == "home" {
				continue
			}
			_, want := value(k, sources)
			got := fmt.Sprint(k.value(&c))
			if l, ok := k.value(&c).([]string); ok && len(l) == 1 {
				got = l[0]
			}
			if got != want {
				t.Errorf("%d sources: %s = %s, want %s", sources, k.key, got, want)
			}
		}
	}
}

// TestPrintConfig checks the --print-config format: every key once, in
// table order, with its value as JSON.
func TestPrintConfig(t *testing.T) {
	testpar.Parallel(t)
	home := filepath.Join(t.TempDir(), "h")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--home", home, "--seed", "tcp://192.0.2.1:7437", "--sync-peers", "5", "--print-config"}, &stdout, &stderr, envOf(nil)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := `{
  "home": "` + home + `",
  "name": "",
  "org": "",
  "roster": "",
  "listen": [
    "tcp://0.0.0.0:7437"
  ],
  "no_unix": false,
  "seeds": [
    "tcp://192.0.2.1:7437"
  ],
  "no_mdns": false,
  "mdns_interface": "",
  "mailbox_group": "",
  "presence_ttl": "5m",
  "presence_away_after": "10m",
  "presence_offline_after": "1h",
  "reply_depth_max": 16,
  "keepalive": "15s",
  "idle_timeout": "45s",
  "peer_exchange_interval": "30s",
  "handshakes_per_source": 8,
  "max_handshakes": 128,
  "link_send_queue_mib": 8,
  "link_recv_rate_mib": 32,
  "archive_retention": "720h",
  "retention_interval": "1m",
  "sync_peers": 5,
  "sync_timeout": "10s",
  "compact_at_start_mib": 64,
  "sender_store_mib": 256,
  "sender_store_envelopes": 50000,
  "channel_sender_rate": 600,
  "channel_sender_burst": 2000,
  "channel_sender_mib_per_hour": 256,
  "mailbox_max_files": 200000,
  "mailbox_max_mib": 2048,
  "mailbox_min_free_mib": 256,
  "attachment_max_mib": 64,
  "attachment_eager_max_mib": 64,
  "attachment_channel_eager_max_kib": 1024,
  "attachment_sender_max_mib": 1024,
  "attachment_fetch_rate_mib": 0,
  "delivery_window": "24h",
  "envelope_ttl": "5m",
  "log_level": "info",
  "log_format": "text",
  "http": "",
  "http_allow_remote": false,
  "metrics": "",
  "metrics_allow_remote": false
}
`
	if stdout.String() != want {
		t.Errorf("--print-config:\n%s\nwant:\n%s", stdout.String(), want)
	}
	// With no seeds, the list prints as null, as it always has.
	stdout.Reset()
	if code := run([]string{"--home", home, "--print-config"}, &stdout, &stderr, envOf(nil)); code != 0 || !strings.Contains(stdout.String(), `"seeds": null,`) {
		t.Errorf("--print-config without seeds: exit %d\n%s", code, stdout.String())
	}
}

// TestConfigLinkLimits: the send queue's bytes and the receive rate
// reach the transport config; 0 turns the rate limit off; bad values
// are refused naming the key's range.
func TestConfigLinkLimits(t *testing.T) {
	testpar.Parallel(t)
	home := filepath.Join(t.TempDir(), "h")
	for _, c := range []struct {
		args      []string
		env       map[string]string
		queue     int
		rate      float64
		wantError string
	}{
		{args: nil, queue: 8 << 20, rate: 32 << 20},
		{args: []string{"--link-send-queue-mib", "2", "--link-recv-rate-mib", "100"}, queue: 2 << 20, rate: 100 << 20},
		{env: map[string]string{"MESH_LINK_RECV_RATE_MIB": "0"}, queue: 8 << 20, rate: -1},
		{args: []string{"--link-send-queue-mib", "0"}, wantError: "want 1 to 1024"},
		{args: []string{"--link-send-queue-mib", "2048"}, wantError: "want 1 to 1024"},
		{args: []string{"--link-recv-rate-mib", "-1"}, wantError: "want 0 (no limit) or more"},
	} {
		cfg, err := resolve(t, append([]string{"--home", home}, c.args...), c.env)
		if err != nil {
			t.Fatal(err)
		}
		nc, _, err := nodeConfig(cfg, io.Discard)
		if c.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("%v: err %v, want one that says %q", c.args, err, c.wantError)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if nc.Transport.SendQueueBytes != c.queue || nc.Transport.RecvRate != c.rate {
			t.Errorf("%v %v: queue %d rate %v, want %d and %v", c.args, c.env, nc.Transport.SendQueueBytes, nc.Transport.RecvRate, c.queue, c.rate)
		}
	}
}

// TestConfigTypeErrorNamesKeyLineAndExample: a value of the wrong type in
// the file is an error that names the key, its line, the type wanted and
// a line that sets it, not the decoder's reflected Go types.
func TestConfigTypeErrorNamesKeyLineAndExample(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	for _, tc := range []struct{ file, want string }{
		{"name = \"x\"\nlisten = \"tcp://127.0.0.1:7437\"\n",
			`line 2: listen is a string, want a list of strings, like: listen = ["tcp://0.0.0.0:7437"]`},
		{"# ttl\npresence_ttl = 300\n", `line 2: presence_ttl is a number, want a duration in quotes, like: presence_ttl = "5m"`},
		{"no_mdns = \"yes\"\n", `line 1: no_mdns is a string, want true or false, like: no_mdns = true`},
		{"sync_peers = \"3\"\n", `line 1: sync_peers is a string, want a whole number (no quotes), like: sync_peers = 3`},
		{"sync_peers = 3.5\n", `line 1: sync_peers is a decimal number, want a whole number (no quotes), like: sync_peers = 3`},
		{"listen = [7437]\n", `line 1: listen is a list of numbers, want a list of strings, like: listen = ["tcp://0.0.0.0:7437"]`},
		{"seeds = \"tcp://10.0.0.5:7437\"\n", `line 1: seeds is a string, want a list of strings, like: seeds = ["tcp://HOST:7437"]`},
		{"name = 7\n", `line 1: name is a number, want a string in quotes, like: name = "..."`},
	} {
		p := filepath.Join(dir, "meshd.toml")
		if err := os.WriteFile(p, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := resolve(t, []string{"--config", p}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v\nwant %s", tc.file, err, tc.want)
			continue
		}
		if msg := err.Error(); len(msg) > 300 || strings.Contains(msg, "struct") {
			t.Errorf("%q: error too long or with Go types (%d chars): %s", tc.file, len(msg), msg)
		}
	}
}

// TestPrintConfigValidates: --print-config refuses what meshd would
// refuse (exit 2 and the error), not only what the file's syntax does.
func TestPrintConfigValidates(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "tcp://127.0.0.1:99999"}, "port must be a number from 0 to 65535"},
		{[]string{"--seed", "10.0.0.5:7437"}, "want tcp://host:port"},
		{[]string{"--presence-ttl", "300"}, `presence ttl "300": want a duration`},
		{[]string{"--keepalive", "10s", "--idle-timeout", "15s"}, "at least twice the keepalive"},
		{[]string{"--sync-peers", "99"}, "sync peers 99"},
		{[]string{"--log-level", "loud"}, `log level "loud"`},
		{[]string{"--metrics", "0.0.0.0:9464"}, "--metrics-allow-remote"},
		{[]string{"--http", "127.0.0.1"}, "want HOST:PORT"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--home", filepath.Join(dir, "h")}, tc.args...)
		args = append(args, "--print-config")
		if code := run(args, &stdout, &stderr, envOf(nil)); code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("meshd %v --print-config: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}
