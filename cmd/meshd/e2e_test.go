package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testbin"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testtmp"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// bins holds the real binaries, built once per test run.
var bins struct {
	once           sync.Once
	dir            string
	cleanup        func()
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
		bins.dir, bins.cleanup, bins.err = testbin.Build(root, "./cmd/meshd", "./cmd/meshctl")
		if bins.err != nil {
			return
		}
		exe := ""
		if runtime.GOOS == "windows" {
			exe = ".exe" // go build -o DIR/ names them as the system does
		}
		bins.meshd = filepath.Join(bins.dir, "meshd"+exe)
		bins.meshctl = filepath.Join(bins.dir, "meshctl"+exe)
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.meshd, bins.meshctl
}

func TestMain(m *testing.M) {
	testpar.Gated()
	testtmp.Use()
	code := m.Run()
	if bins.cleanup != nil {
		bins.cleanup()
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
	return meshctlRunWithin(t, 30*time.Second, bin, args...)
}

// meshctlRunWithin is meshctlRun with a bound of d: for the commands that
// move tens of megabytes while other tests run.
func meshctlRunWithin(t testing.TB, d time.Duration, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
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

// waitStatus waits until the daemon answers meshctl status. It polls the
// control socket in-process, which costs far less than a meshctl process
// per check, and then asks meshctl once.
func waitStatus(t testing.TB, meshctl, home string, d *daemon) statusJSON {
	t.Helper()
	c := api.NewClient(filepath.Join(home, "meshd.sock"))
	var r result
	if !testwait.Until(15*time.Second, func() bool {
		select {
		case <-d.done:
			t.Fatalf("meshd exited early: %v\n%s", d.err, d.stderr.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Status(ctx); err != nil {
			return false
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

// waitPeers waits until meshctl peers lists want peers. It polls the
// control socket in-process and runs meshctl once the count is right.
func waitPeers(t testing.TB, meshctl, home string, want int, within time.Duration) map[string]string {
	t.Helper()
	c := api.NewClient(filepath.Join(home, "meshd.sock"))
	var got map[string]string
	if !testwait.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if p, err := c.Peers(ctx); err == nil && len(p.Peers) != want {
			got = map[string]string{}
			for _, x := range p.Peers {
				got[x.Key.String()] = x.Network
			}
			return false
		}
		got = peerKeys(t, meshctl, home)
		return len(got) == want
	}) {
		t.Fatalf("%s: %d peers after %v, want %d: %v", home, len(got), within, want, got)
	}
	return got
}
