package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// pagecheckDir holds the Node.js script that drives the status page in
// Chromium, and its pinned playwright-core (npm ci --prefix it).
const pagecheckDir = "testdata/pagecheck"

// chromiumPath returns the Chromium to drive: $CHROMIUM, else Debian's.
func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("chromium from $CHROMIUM not found: %w", err)
		}
		return path, nil
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not installed (Debian: apt-get install chromium)")
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startMesh3 starts alice (admin, with extra flags), bob (operator) and
// carol (member) on loopback, seeded from alice, and waits until all three
// are linked to each other. It returns the homes by name.
func startMesh3(t *testing.T, meshd, meshctl string, aliceArgs ...string) map[string]string {
	t.Helper()
	tmp := t.TempDir()
	homes, keys := map[string]string{}, map[string]string{}
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
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["bob"], "--role", "operator", "--name", "bob")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["carol"], "--role", "member", "--name", "carol")
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}
	da := startDaemon(t, meshd, a, append(base, aliceArgs...)...)
	seed := tcpListen(t, waitStatus(t, meshctl, a, da))
	for _, n := range []string{"bob", "carol"} {
		d := startDaemon(t, meshd, homes[n], append(base, "--roster", pinned, "--seed", seed)...)
		waitStatus(t, meshctl, homes[n], d)
	}
	for _, n := range []string{"alice", "bob", "carol"} {
		waitPeers(t, meshctl, homes[n], 2, 15*time.Second)
	}
	return homes
}

// uiJSON is what meshctl ui --json prints.
type uiJSON struct {
	URL     string `json:"url"`
	Address string `json:"address"`
	Token   string `json:"token"`
}

// uiOf waits (10 s at most) until meshctl ui tells home's status page.
func uiOf(t *testing.T, meshctl, home string) uiJSON {
	t.Helper()
	var r result
	if !testwait.Until(10*time.Second, func() bool { r = meshctlRun(t, meshctl, "--home", home, "ui", "--json"); return r.code == 0 }) {
		t.Fatalf("meshctl ui: exit %d: %s", r.code, r.stderr)
	}
	var u uiJSON
	if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// waitHTTP polls url, with token as a bearer token, until it answers 200.
func waitHTTP(t *testing.T, url, token string, within time.Duration) {
	t.Helper()
	var err error
	if !testwait.Until(within, func() bool {
		req, rerr := http.NewRequest(http.MethodGet, url, nil)
		if rerr != nil {
			t.Fatal(rerr)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("%s did not answer 200 within %v: %v", url, within, err)
	}
}

// TestStatusPageInChromium serves the status page from one node of a real
// three-node mesh and drives it in headless Chromium: the page shows both
// peers, then a channel message sent from another node appears in its
// live tail within 2 s, as text, with no console or page error.
func TestStatusPageInChromium(t *testing.T) {
	testpar.Parallel(t)
	chromium, err := chromiumPath()
	if err != nil {
		t.Skip(err)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node (Node.js) not installed")
	}
	if _, err := os.Stat(filepath.Join(pagecheckDir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Skip("playwright-core not installed; run: npm ci --prefix cmd/meshd/testdata/pagecheck")
	}
	meshd, meshctl := buildBinaries(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	homes := startMesh3(t, meshd, meshctl, "--http", addr)
	url := "http://" + addr + "/"
	ui := uiOf(t, meshctl, homes["alice"])
	waitHTTP(t, url+"api/state", ui.Token, 10*time.Second)

	// The page is read-only, on the real binary too.
	req, err := http.NewRequest(http.MethodPost, url+"events", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ui.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /events: %s, want 405", resp.Status)
	}

	// alice takes #general into her inbox; bob will write to it.
	meshctlOK(t, meshctl, "--home", homes["alice"], "channel", "create", "general")
	meshctlOK(t, meshctl, "--home", homes["alice"], "subscribe", "general")
	testwait.For(t, 10*time.Second, "bob to learn #general", func() bool {
		return meshctlRun(t, meshctl, "--home", homes["bob"], "channel", "show", "general").code == 0
	})

	// Markup and a handler in the body must come out as text.
	body := `ship it <b>now</b> <img src=x onerror="window.__meshXSS=true"> & "done"`
	// The browser logs in through the address meshctl ui prints.
	args := []string{"check.mjs", "--url", ui.URL, "--names", "bob,carol", "--body", body}
	if shot := os.Getenv("MESHD_PAGECHECK_SCREENSHOT"); shot != "" {
		args = append(args, "--screenshot", shot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, args...)
	cmd.Dir = pagecheckDir
	cmd.Env = append(cleanEnv(), "CHROMIUM="+chromium)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	var out syncBuffer
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			lines <- sc.Text()
		}
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf(format+"\ncheck.mjs stdout:\n%s\nstderr:\n%s", append(args, out.String(), stderr.String())...)
	}

	ready := false
	timeout := time.After(60 * time.Second)
	for !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				fail("check.mjs ended before READY")
			}
			ready = l == "READY"
		case <-timeout:
			fail("check.mjs not READY within 60s")
		}
	}
	var sent struct {
		SentTo []string `json:"sent_to"`
	}
	meshctlJSON(t, meshctl, &sent, "--home", homes["bob"], "send", "#general", body)
	if len(sent.SentTo) == 0 {
		fail("bob's message was handed to no peer")
	}
	if _, err := io.WriteString(stdin, "SENT\n"); err != nil {
		fail("tell check.mjs: %v", err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		fail("check.mjs: %v", err)
	}
	if !strings.Contains(out.String(), "OK") {
		fail("check.mjs did not say OK")
	}
	t.Log(strings.TrimSpace(out.String()))
}

// TestStatusPageConfig: the http keys follow file < env < flags, and an
// address beyond loopback is refused (exit 2, with a hint) unless remote
// access is allowed.
func TestStatusPageConfig(t *testing.T) {
	testpar.Parallel(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "meshd.toml")
	if err := os.WriteFile(cfgPath, []byte("http = \"127.0.0.1:1111\"\nhttp_allow_remote = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := resolve(t, []string{"--config", cfgPath}, nil)
	if err != nil || c.HTTP != "127.0.0.1:1111" || !c.HTTPAllowRemote {
		t.Fatalf("file: %+v, %v", c, err)
	}
	c, err = resolve(t, []string{"--config", cfgPath}, map[string]string{"MESH_HTTP": "127.0.0.1:2222", "MESH_HTTP_ALLOW_REMOTE": "false"})
	if err != nil || c.HTTP != "127.0.0.1:2222" || c.HTTPAllowRemote {
		t.Fatalf("env: %+v, %v", c, err)
	}
	c, err = resolve(t, []string{"--config", cfgPath, "--http", "localhost:3333"}, map[string]string{"MESH_HTTP": "127.0.0.1:2222"})
	if err != nil || c.HTTP != "localhost:3333" {
		t.Fatalf("flag: %+v, %v", c, err)
	}
	if _, err := resolve(t, nil, map[string]string{"MESH_HOME": dir, "MESH_HTTP_ALLOW_REMOTE": "maybe"}); err == nil {
		t.Fatal("MESH_HTTP_ALLOW_REMOTE=maybe accepted")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:8080"}, "hint: use a loopback address"},
		{[]string{"--http", ":8080"}, "not a loopback address"},
		{[]string{"--http", "192.0.2.1:8080"}, "--http-allow-remote"},
		{[]string{"--http", "127.0.0.1"}, "want HOST:PORT"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"--home", filepath.Join(dir, "h"), "--no-mdns"}, tc.args...)
		if code := run(args, &stdout, &stderr, envOf(nil)); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("meshd %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--home", filepath.Join(dir, "h"), "--http", "0.0.0.0:8080", "--http-allow-remote", "--print-config"},
		&stdout, &stderr, envOf(nil)); code != 0 {
		t.Fatalf("--http-allow-remote: exit %d: %s", code, stderr.String())
	}
	var printed struct {
		HTTP            string `json:"http"`
		HTTPAllowRemote bool   `json:"http_allow_remote"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &printed); err != nil || printed.HTTP != "0.0.0.0:8080" || !printed.HTTPAllowRemote {
		t.Fatalf("printed config %s: %v", stdout.String(), err)
	}
}
