package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
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
	home := filepath.Join(t.TempDir(), "h")
	c, err := resolve(t, []string{"--home", home}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, _, err := nodeConfig(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Transport.KeepaliveInterval != 5*time.Second || nc.Transport.IdleTimeout != 15*time.Second {
		t.Fatalf("default timers: keepalive %v idle %v", nc.Transport.KeepaliveInterval, nc.Transport.IdleTimeout)
	}
	c, err = resolve(t, []string{"--home", home, "--keepalive", "20s"}, map[string]string{"MESH_IDLE_TIMEOUT": "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if nc, _, err = nodeConfig(c, io.Discard); err != nil {
		t.Fatal(err)
	}
	if nc.Transport.KeepaliveInterval != 20*time.Second || nc.Transport.IdleTimeout != time.Minute {
		t.Fatalf("set timers: keepalive %v idle %v", nc.Transport.KeepaliveInterval, nc.Transport.IdleTimeout)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--keepalive", "10ms"}, "keepalive"},
		{[]string{"--keepalive", "soon"}, "keepalive"},
		{[]string{"--idle-timeout", "8s"}, "at least twice the keepalive"},
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
