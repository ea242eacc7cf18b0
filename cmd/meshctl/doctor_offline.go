package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
)

// meshdDown reports whether err says that no meshd runs on the home (no
// control socket, or nothing listens on it), as opposed to a socket
// this user may not open.
func (a *app) meshdDown(err error) bool {
	if !errors.Is(err, api.ErrNoDaemon) {
		return false
	}
	conn, derr := net.DialTimeout("unix", a.home().ControlSocket(), 2*time.Second)
	if derr == nil {
		conn.Close()
		return false // it answers now
	}
	return !errors.Is(derr, syscall.EACCES) && !errors.Is(derr, syscall.EPERM)
}

// offlineDoctor runs the checks that need no meshd: the home, the
// identity, the roster, the configuration (as meshd --print-config
// checks it) and the listen ports; and says that meshd is not running.
func (a *app) offlineDoctor() *api.Doctor {
	h := a.home()
	out := &api.Doctor{Checks: []api.DoctorCheck{}}
	add := func(name, status, fix, format string, args ...any) {
		out.Checks = append(out.Checks, api.DoctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...), Fix: fix})
		if status == "problem" {
			out.Problems++
		}
	}
	add("meshd", "problem", fmt.Sprintf("start it: meshd --home %s (or systemctl start meshd for the service); the checks below are those that need no running meshd", h.Dir),
		"meshd is not running on the home %s (its control socket %s does not answer)", h.Dir, h.ControlSocket())
	if !checkHomeDir(h, add) {
		return out
	}
	checkIdentity(h, add)
	if r, err := h.LoadRoster(); err == nil {
		out.Members = len(r.Members)
	}
	checkRosterFile(h, add)
	if cfg, ok := checkConfig(h, add); ok {
		checkPorts(cfg, add)
	}
	return out
}

func checkHomeDir(h home.Home, add addCheck) bool {
	fi, err := os.Stat(h.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add("home", "warn", fmt.Sprintf("meshd makes it at its first start: meshd --home %s (or meshctl --home %s init --name NAME first)", h.Dir, h.Dir),
			"the home %s does not exist yet", h.Dir)
		return false
	case err != nil:
		add("home", "problem", "run meshctl as the user that runs meshd", "the home %s: %v", h.Dir, err)
		return false
	case !fi.IsDir():
		add("home", "problem", "move the file aside, or give another --home", "the home %s is not a directory", h.Dir)
		return false
	}
	if uid, ok := fileUID(fi); ok && uid != os.Geteuid() {
		owner, _ := ownerOf(h.Dir, h.Dir)
		add("home", "problem", "run meshctl (and meshd) as "+owner+", with --home "+h.Dir,
			"the home %s belongs to %s, not to this user: meshd refuses a home it does not own", h.Dir, owner)
		return false
	}
	if fi.Mode().Perm()&0o022 != 0 {
		add("home", "problem", "check its files, then chmod 700 "+h.Dir,
			"group or others may write to the home %s (mode %04o): meshd refuses it", h.Dir, fi.Mode().Perm())
		return true
	}
	add("home", "ok", "", "%s (mode %04o)", h.Dir, fi.Mode().Perm())
	return true
}

func checkIdentity(h home.Home, add addCheck) {
	id, err := h.LoadIdentity()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add("identity", "warn", fmt.Sprintf("meshd makes one at its first start, or: meshctl --home %s init --name NAME", h.Dir),
			"no identity yet (%s)", h.KeyPath())
	case err != nil:
		add("identity", "problem", "restore identity.key from a backup; a new key is a new node, which an admin must add again",
			"the identity does not load: %v", err)
	default:
		add("identity", "ok", "", "%s (%s)", id.Pub.Fingerprint(), id.Pub)
	}
}

func checkRosterFile(h home.Home, add addCheck) {
	r, err := h.LoadRoster()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add("roster", "ok", "to join an org instead: meshctl join TOKEN (from meshctl invite on one of its admins)",
			"no roster yet: meshd starts a one-node org of its own at its first start")
		return
	case err != nil:
		add("roster", "problem", fmt.Sprintf("move %s aside and get the org's roster again (meshctl join TOKEN, or --roster FILE)", h.RosterPath()),
			"the roster does not load: %v", err)
		return
	}
	id, err := h.LoadIdentity()
	if err != nil {
		add("roster", "ok", "", "org %q, roster v%d, %d members", r.Org, r.Version, len(r.Members))
		return
	}
	m, ok := r.Member(id.Pub)
	if !ok {
		add("roster", "problem", fmt.Sprintf("ask an admin of %q to add this node: meshctl roster add %s, then meshctl roster publish (or an invite: meshctl join TOKEN here)", r.Org, id.Pub.Fingerprint()),
			"this node (%s) is not in its roster %q v%d: every member refuses its links", id.Pub.Fingerprint(), r.Org, r.Version)
		return
	}
	add("roster", "ok", "", "org %q, roster v%d, %d members; this node is %s", r.Org, r.Version, len(r.Members), m.Role)
}

// offlineConfig is the part of meshd --print-config the port check reads.
type offlineConfig struct {
	Listen []string `json:"listen"`
}

// meshdBinary finds meshd: next to this meshctl, else on PATH.
func meshdBinary() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "meshd")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath("meshd")
}

// checkConfig runs meshd --print-config on the home, which checks the
// configuration (file, environment) as meshd would.
func checkConfig(h home.Home, add addCheck) (offlineConfig, bool) {
	var cfg offlineConfig
	bin, err := meshdBinary()
	if err != nil {
		add("config", "warn", "put meshd on PATH (or next to meshctl) to check the configuration", "meshd not found, so the configuration is not checked: %v", err)
		return cfg, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--home", h.Dir, "--print-config")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		add("config", "problem", "fix the value named (the config file, a MESH_* variable, or a flag); meshd --print-config checks it again",
			"meshd would refuse its configuration: %s", msg)
		return cfg, false
	}
	if err := json.Unmarshal(stdout.Bytes(), &cfg); err != nil {
		add("config", "warn", "", "meshd --print-config printed what this meshctl does not read: %v", err)
		return cfg, false
	}
	add("config", "ok", "", "meshd --print-config accepts it (listen %s)", strings.Join(cfg.Listen, " "))
	return cfg, true
}

// checkPorts tries each TCP listen address with a fixed port: one that
// another program holds would stop meshd at its start.
func checkPorts(cfg offlineConfig, add addCheck) {
	var bad, good []string
	fix := ""
	for _, l := range cfg.Listen {
		addr, ok := strings.CutPrefix(l, "tcp://")
		if !ok || strings.HasSuffix(addr, ":0") {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				bad = append(bad, fmt.Sprintf("%s is in use by another program", l))
				fix = "stop the program that holds the port (ss -ltnp shows it), or give this node a port of its own: --listen tcp://:7438, or tcp://:0 for any free one"
			} else {
				bad = append(bad, fmt.Sprintf("%s: %v", l, err))
				if fix == "" {
					fix = "use an address of this host and a port this user may bind (1024 and up)"
				}
			}
			continue
		}
		ln.Close()
		good = append(good, l)
	}
	switch {
	case len(bad) > 0:
		add("ports", "problem", fix, "meshd could not listen: %s", strings.Join(bad, "; "))
	case len(good) > 0:
		add("ports", "ok", "", "free: %s", strings.Join(good, " "))
	}
}

// addCheck adds one check's result.
type addCheck func(name, status, fix, format string, args ...any)
