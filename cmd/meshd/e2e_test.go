package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// bins holds the real binaries, built once per test run.
var bins struct {
	once           sync.Once
	dir            string
	meshd, meshctl string
	err            error
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

// buildBinaries builds meshd and meshctl; tests that need them call it.
func buildBinaries(t testing.TB) (meshd, meshctl string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the real binaries; skipped with -short")
	}
	bins.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			bins.err = err
			return
		}
		bins.dir, err = os.MkdirTemp("", "meshd-e2e-bin-")
		if err != nil {
			bins.err = err
			return
		}
		for _, b := range []string{"meshd", "meshctl"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(bins.dir, b), "./cmd/"+b)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("go build %s: %v\n%s", b, err, out)
				return
			}
		}
		bins.meshd = filepath.Join(bins.dir, "meshd")
		bins.meshctl = filepath.Join(bins.dir, "meshctl")
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.meshd, bins.meshctl
}

func TestMain(m *testing.M) {
	testpar.Default()
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is a running meshd process.
type daemon struct {
	t      testing.TB
	home   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// cleanEnv is the environment for child processes: no MESH_* leaks in.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "MESH_") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

func startDaemon(t testing.TB, meshd, home string, args ...string) *daemon {
	t.Helper()
	return startDaemonCmd(t, exec.Command(meshd, append([]string{"--home", home}, args...)...), home)
}

func startDaemonCmd(t testing.TB, cmd *exec.Cmd, home string) *daemon {
	t.Helper()
	d := &daemon{t: t, home: home, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Env = cleanEnv()
	cmd.Stdout = d.stderr
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("meshd %s log:\n%s", home, d.stderr.String())
		}
	})
	return d
}

// stop signals the process and waits (bounded) for it to exit.
func (d *daemon) stop(sig syscall.Signal) error {
	select {
	case <-d.done:
		return d.err
	default:
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
		return d.err
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		return errors.New("meshd did not exit within 10s of " + sig.String())
	}
}

// waitLog waits until the daemon's log holds text, and fails the test if
// it does not within the bound or the daemon exits first.
func (d *daemon) waitLog(text string, within time.Duration) {
	d.t.Helper()
	if !testwait.Until(within, func() bool {
		if strings.Contains(d.stderr.String(), text) {
			return true
		}
		select {
		case <-d.done:
			d.t.Fatalf("meshd exited before logging %q: %v\n%s", text, d.err, d.stderr.String())
		default:
		}
		return false
	}) {
		d.t.Fatalf("meshd did not log %q within %v\n%s", text, within, d.stderr.String())
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func meshctlRun(t testing.TB, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("meshctl %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func meshctlOK(t testing.TB, bin string, args ...string) string {
	t.Helper()
	r := meshctlRun(t, bin, args...)
	if r.code != 0 {
		t.Fatalf("meshctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func meshctlJSON(t testing.TB, bin string, v any, args ...string) {
	t.Helper()
	out := meshctlOK(t, bin, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("meshctl %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type statusJSON struct {
	Key           string   `json:"key"`
	Fingerprint   string   `json:"fingerprint"`
	Role          string   `json:"role"`
	Org           string   `json:"org"`
	RosterVersion uint64   `json:"roster_version"`
	Listen        []string `json:"listen"`
	Links         int      `json:"links"`
}

type peersJSON struct {
	Peers []struct {
		Key       string    `json:"key"`
		Name      string    `json:"name"`
		Role      string    `json:"role"`
		Address   string    `json:"address"`
		Network   string    `json:"network"`
		Direction string    `json:"direction"`
		LastSeen  time.Time `json:"last_seen"`
	} `json:"peers"`
}

// waitStatus polls meshctl status until the daemon answers.
func waitStatus(t testing.TB, meshctl, home string, d *daemon) statusJSON {
	t.Helper()
	var r result
	if !testwait.Until(15*time.Second, func() bool {
		select {
		case <-d.done:
			t.Fatalf("meshd exited early: %v\n%s", d.err, d.stderr.String())
		default:
		}
		r = meshctlRun(t, meshctl, "--home", home, "status", "--json")
		return r.code == 0
	}) {
		t.Fatalf("meshd on %s did not answer status within 15s\n%s", home, d.stderr.String())
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func tcpListen(t testing.TB, s statusJSON) string {
	t.Helper()
	for _, a := range s.Listen {
		if strings.HasPrefix(a, "tcp://") {
			return a
		}
	}
	t.Fatalf("no tcp listener in %v", s.Listen)
	return ""
}

func peerKeys(t testing.TB, meshctl, home string) map[string]string {
	t.Helper()
	var p peersJSON
	meshctlJSON(t, meshctl, &p, "--home", home, "peers")
	out := map[string]string{}
	for _, x := range p.Peers {
		out[x.Key] = x.Network
	}
	return out
}

func waitPeers(t testing.TB, meshctl, home string, want int, within time.Duration) map[string]string {
	t.Helper()
	var got map[string]string
	if !testwait.Until(within, func() bool { got = peerKeys(t, meshctl, home); return len(got) == want }) {
		t.Fatalf("%s: %d peers after %v, want %d: %v", home, len(got), within, want, got)
	}
	return got
}

func TestFirstRunStartsOneNodeOrg(t *testing.T) {
	t.Parallel()
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "solo")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "solo")
	s := waitStatus(t, meshctl, h, d)
	if s.Role != "admin" || s.RosterVersion != 1 || !strings.HasPrefix(s.Org, "org-") {
		t.Fatalf("status = %+v, want admin of a new org at v1", s)
	}
	if !strings.Contains(d.stderr.String(), "one-node org") {
		t.Fatalf("meshd did not say it started a one-node org:\n%s", d.stderr.String())
	}
	if fi, err := os.Stat(filepath.Join(h, "identity.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity.key: %v, mode %v", err, fi.Mode().Perm())
	}
	if fi, err := os.Stat(filepath.Join(h, "meshd.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: %v, mode %v", err, fi.Mode().Perm())
	}
	// Text status names the node and the org.
	txt := meshctlOK(t, meshctl, "--home", h, "status")
	for _, want := range []string{"solo", s.Org, "roster v1", "links"} {
		if !strings.Contains(txt, want) {
			t.Fatalf("status text lacks %q:\n%s", want, txt)
		}
	}

	// A second meshd on the same home is refused with a clear message.
	r := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("second meshd on one home did not exit")
	}
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != 1 || !strings.Contains(r.stderr.String(), "in use") {
		t.Fatalf("second meshd: %v\n%s", r.err, r.stderr.String())
	}

	// SIGTERM shuts down cleanly and removes the control socket.
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("meshd exit after SIGTERM: %v\n%s", err, d.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(h, "meshd.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("control socket left behind: %v", err)
	}
	// meshctl without a daemon says so and hints how to start one.
	res := meshctlRun(t, meshctl, "--home", h, "status")
	if res.code != 1 || !strings.Contains(res.stderr, "not running") || !strings.Contains(res.stderr, "hint:") {
		t.Fatalf("status without meshd: %+v", res)
	}
}

// TestSeedMeshRosterPublish runs three real meshd processes with seeds only
// (no mDNS): they form a full mesh, a roster update published on one node
// reaches all, and the member it removes is disconnected.
func TestSeedMeshRosterPublish(t *testing.T) {
	t.Parallel()
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	homes := map[string]string{}
	keys := map[string]string{}
	for _, n := range []string{"alice", "bob", "carol"} {
		homes[n] = filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", homes[n], "init", "--name", n)
		keys[n] = id.Key
	}
	a := homes["alice"]
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["bob"], "--role", "member", "--name", "bob")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["carol"], "--role", "operator", "--name", "carol")
	pinned := filepath.Join(tmp, "roster-v3.cbor")
	b, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}

	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	sa := waitStatus(t, meshctl, a, da)
	seed := tcpListen(t, sa)
	db := startDaemon(t, meshd, homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix", "--roster", pinned, "--seed", seed)
	dc := startDaemon(t, meshd, homes["carol"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned, "--seed", seed)
	waitStatus(t, meshctl, homes["bob"], db)
	waitStatus(t, meshctl, homes["carol"], dc)

	for _, n := range []string{"alice", "bob", "carol"} {
		waitPeers(t, meshctl, homes[n], 2, 10*time.Second)
	}
	// Peers text output lists names, roles and each link's transport
	// (tcp, or unix once a same-host link moved to the socket).
	txt := meshctlOK(t, meshctl, "--home", a, "peers")
	for _, want := range []string{"bob", "carol", "member", "operator", "VIA"} {
		if !strings.Contains(txt, want) {
			t.Fatalf("peers text lacks %q:\n%s", want, txt)
		}
	}
	if !strings.Contains(txt, "tcp") && !strings.Contains(txt, "unix") {
		t.Fatalf("peers text names no transport:\n%s", txt)
	}

	// alice removes carol and publishes; bob gets v4 and drops carol.
	meshctlOK(t, meshctl, "--home", a, "roster", "remove", "carol")
	out := meshctlOK(t, meshctl, "--home", a, "roster", "publish")
	if !strings.Contains(out, "v4") {
		t.Fatalf("publish output: %s", out)
	}
	var s statusJSON
	var pk map[string]string
	if !testwait.Until(10*time.Second, func() bool {
		s = statusJSON{}
		meshctlJSON(t, meshctl, &s, "--home", homes["bob"], "status")
		pk = peerKeys(t, meshctl, homes["bob"])
		_, hasCarol := pk[keys["carol"]]
		return s.RosterVersion == 4 && !hasCarol
	}) {
		t.Fatalf("bob: roster v%d, peers %v; want v4 without carol", s.RosterVersion, pk)
	}
	waitPeers(t, meshctl, homes["carol"], 0, 10*time.Second)

	// Publishing the same roster again is refused with its reason.
	r := meshctlRun(t, meshctl, "--home", homes["bob"], "roster", "publish", pinned)
	if r.code != 1 || !strings.Contains(r.stderr, "rollback") && !strings.Contains(r.stderr, "not newer") {
		t.Fatalf("publishing v3 over v4: exit %d: %s", r.code, r.stderr)
	}

	for _, d := range []*daemon{da, db, dc} {
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

// TestSIGHUPReloadsRoster: a newer roster written to the --roster file is
// applied on SIGHUP; an older one is refused and the node keeps running.
func TestSIGHUPReloadsRoster(t *testing.T) {
	t.Parallel()
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	var idb struct {
		Key string `json:"key"`
	}
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "a")
	meshctlJSON(t, meshctl, &idb, "--home", b, "init", "--name", "b")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	pinned := filepath.Join(tmp, "pinned.cbor")
	cp := func() {
		data, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pinned, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp()
	// A separate admin copy edits the roster while meshd runs on another home.
	admin := filepath.Join(tmp, "admin")
	os.MkdirAll(admin, 0o700)
	for _, f := range []string{"identity.key", "identity.pub", "roster.cbor"} {
		data, _ := os.ReadFile(filepath.Join(a, f))
		os.WriteFile(filepath.Join(admin, f), data, 0o600)
	}
	run := filepath.Join(tmp, "run")
	os.MkdirAll(run, 0o700)
	for _, f := range []string{"identity.key", "identity.pub"} {
		data, _ := os.ReadFile(filepath.Join(a, f))
		os.WriteFile(filepath.Join(run, f), data, 0o600)
	}
	d := startDaemon(t, meshd, run, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned)
	if s := waitStatus(t, meshctl, run, d); s.RosterVersion != 1 {
		t.Fatalf("start at v%d", s.RosterVersion)
	}
	meshctlOK(t, meshctl, "--home", admin, "roster", "add", idb.Key, "--role", "member", "--name", "b")
	data, _ := os.ReadFile(filepath.Join(admin, "roster.cbor"))
	os.WriteFile(pinned, data, 0o644)
	d.cmd.Process.Signal(syscall.SIGHUP)
	var v2 statusJSON
	if !testwait.Until(5*time.Second, func() bool {
		v2 = statusJSON{}
		meshctlJSON(t, meshctl, &v2, "--home", run, "status")
		return v2.RosterVersion == 2
	}) {
		t.Fatalf("roster v%d after SIGHUP, want v2\n%s", v2.RosterVersion, d.stderr.String())
	}
	// Rolling the file back and reloading is refused, and meshd keeps
	// running: wait for the refusal in its log, then look.
	cp()
	d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitLog("roster reload refused", 10*time.Second)
	var s statusJSON
	meshctlJSON(t, meshctl, &s, "--home", run, "status")
	if s.RosterVersion != 2 || !strings.Contains(d.stderr.String(), "roster reload refused") {
		t.Fatalf("rollback via SIGHUP: v%d\n%s", s.RosterVersion, d.stderr.String())
	}
}
