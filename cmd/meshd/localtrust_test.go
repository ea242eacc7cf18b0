package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// sharedTempDir returns a directory every local user may enter (0755),
// removed at the end of the test: t.TempDir's are 0700, which would keep
// another user out before any check under test is reached.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "meshd-localtrust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// otherUser is uid and gid 65534 (nobody), with no groups.
const otherUser = 65534

// needOtherUser skips the test unless it can run commands as another
// local user: it must run as root, with setpriv (util-linux).
func needOtherUser(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as another user (setpriv --reuid)")
	}
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	return p
}

// runAs runs argv as the other user and returns its exit code and output.
func runAs(t *testing.T, setpriv string, argv ...string) result {
	t.Helper()
	args := append([]string{"--reuid=" + strconv.Itoa(otherUser), "--regid=" + strconv.Itoa(otherUser), "--clear-groups", "--"}, argv...)
	cmd := exec.Command(setpriv, args...)
	cmd.Env = cleanEnv("HOME=/nonexistent")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("setpriv %v: no exit within 30s", argv)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("setpriv %v: %v", argv, err)
	}
	return result{code, out.String(), errb.String()}
}

// get sends GET url with the extra header and returns status and body.
func get(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// An event stream never ends: read what comes within the timeout.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// statusPagePaths are every path the page loads, and its API.
var statusPagePaths = []string{"/", "/app.js", "/style.css", "/favicon.svg", "/api/state", "/events"}

// TestStatusPageToken runs a real meshd with --http: meshctl ui prints the
// login address; the file holding it is 0600; without the token every
// path answers 401 with no data; the token never reaches the log; the
// file is gone after meshd stops; a restart makes a new token.
func TestStatusPageToken(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "n")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "owner", "--http", addr)
	waitStatus(t, meshctl, h, d)
	ui := uiOf(t, meshctl, h)
	if ui.Address != "http://"+addr+"/" || len(ui.Token) < 32 || ui.URL != ui.Address+"?token="+ui.Token {
		t.Fatalf("meshctl ui: %+v", ui)
	}
	if out := meshctlOK(t, meshctl, "--home", h, "ui"); strings.TrimSpace(out) != ui.URL {
		t.Fatalf("meshctl ui prints %q, want %q", out, ui.URL)
	}
	st, err := os.Stat(filepath.Join(h, "statuspage.url"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("statuspage.url: %v, %v", st, err)
	}
	base := "http://" + addr
	for _, p := range statusPagePaths {
		code, body := get(t, base+p)
		if code != http.StatusUnauthorized || strings.Contains(body, "owner") || strings.Contains(body, "event:") {
			t.Errorf("GET %s without the token: %d %q", p, code, body)
		}
		if code, _ := get(t, base+p, "Authorization", "Bearer "+ui.Token, "Host", "evil.example"); code != http.StatusForbidden {
			t.Errorf("GET %s, Host evil.example, with the token: %d, want 403", p, code)
		}
	}
	if code, body := get(t, base+"/api/state", "Authorization", "Bearer "+ui.Token); code != http.StatusOK || !strings.Contains(body, "owner") {
		t.Fatalf("GET /api/state with the token: %d %q", code, body)
	}
	code, _ := get(t, ui.URL)
	if code != http.StatusSeeOther {
		t.Fatalf("GET login URL: %d, want 303", code)
	}
	if strings.Contains(d.stderr.String(), ui.Token) {
		t.Fatalf("the token is in meshd's log:\n%s", d.stderr.String())
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h, "statuspage.url")); !os.IsNotExist(err) {
		t.Fatalf("statuspage.url after stop: %v", err)
	}
	d = startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--http", addr)
	waitStatus(t, meshctl, h, d)
	if ui2 := uiOf(t, meshctl, h); ui2.Token == ui.Token {
		t.Fatal("the token survived a restart")
	}
	if code, _ := get(t, base+"/api/state", "Authorization", "Bearer "+ui.Token); code != http.StatusUnauthorized {
		t.Fatalf("the old token after a restart: %d, want 401", code)
	}
	// Without --http, meshctl ui says so, even after a meshd that served
	// the page died without removing its file.
	d.stop(syscall.SIGKILL)
	d = startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, h, d)
	if r := meshctlRun(t, meshctl, "--home", h, "ui"); r.code != 1 || !strings.Contains(r.stderr, "serves no status page") || !strings.Contains(r.stderr, "hint: start meshd with --http") {
		t.Fatalf("meshctl ui without --http: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestStatusPageOtherUser: another local user, with curl under setpriv,
// gets 401 and no data from every path of a real meshd's status page,
// even with a guessed cookie, and cannot read the token file.
func TestStatusPageOtherUser(t *testing.T) {
	testpar.Parallel(t)
	setpriv := needOtherUser(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(sharedTempDir(t), "n")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "owner", "--http", addr)
	waitStatus(t, meshctl, h, d)
	ui := uiOf(t, meshctl, h)

	tokenFile := filepath.Join(h, "statuspage.url")
	if r := runAs(t, setpriv, "cat", tokenFile); r.code == 0 || strings.Contains(r.stdout, ui.Token) {
		t.Fatalf("the other user read %s: exit %d %q", tokenFile, r.code, r.stdout)
	}
	if r := runAs(t, setpriv, meshctlCopy(t, meshctl), "--home", h, "ui"); r.code == 0 || strings.Contains(r.stdout, ui.Token) {
		t.Fatalf("the other user ran meshctl ui: exit %d %q", r.code, r.stdout)
	}
	for _, p := range statusPagePaths {
		for _, extra := range [][]string{nil, {"-H", "Cookie: meshd_ui_000000000000=guess"}, {"-H", "Authorization: Bearer guess"}, {"-X", "POST"}} {
			args := append([]string{curl, "-sS", "--max-time", "3", "-o", "-", "-w", "\n%{http_code}"}, extra...)
			r := runAs(t, setpriv, append(args, "http://"+addr+p)...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			status := lines[len(lines)-1]
			if status != "401" && status != "403" {
				t.Errorf("curl %v %s as uid %d: status %s, want 401 or 403\n%s%s", extra, p, otherUser, status, r.stdout, r.stderr)
			}
			for _, leak := range []string{"owner", "fingerprint", "event:", "EventSource"} {
				if strings.Contains(r.stdout, leak) {
					t.Errorf("curl %v %s as uid %d: the answer holds %q", extra, p, otherUser, leak)
				}
			}
		}
	}
	// The owner, with the token, does see the node's name: the check above could fail.
	code, body := get(t, "http://"+addr+"/api/state", "Authorization", "Bearer "+ui.Token)
	if code != http.StatusOK || !strings.Contains(body, "owner") {
		t.Fatalf("owner with the token: %d %q", code, body)
	}
}

// meshctlCopy copies meshctl where every user may run it.
func meshctlCopy(t *testing.T, meshctl string) string {
	t.Helper()
	p := filepath.Join(sharedTempDir(t), "meshctl")
	installExec(t, meshctl, p)
	return p
}

// TestMetricsHostCheck: the real meshd's /metrics refuses a foreign Host
// (DNS rebinding) with 403 and no metrics, and answers a loopback one.
func TestMetricsHostCheck(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "m")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--metrics", "127.0.0.1:0")
	waitStatus(t, meshctl, h, d)
	url := "http://" + waitMetricsAddr(t, d) + "/metrics"
	for host, want := range map[string]int{"evil.example": 403, "evil.example:9464": 403, "192.0.2.7": 403, "localhost": 200, "127.0.0.1": 200, "[::1]:9464": 200} {
		code, body := get(t, url, "Host", host)
		if code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
		if want == 403 && strings.Contains(body, "meshd_") {
			t.Errorf("Host %s: metrics in the refusal", host)
		}
	}
}

// TestMeshctlPermissionDenied: another local user running meshctl against
// a real meshd's home is told permission denied, who owns the node and
// how to run as that user, not "meshd is not running" with a hint to
// start a second meshd.
func TestMeshctlPermissionDenied(t *testing.T) {
	testpar.Parallel(t)
	setpriv := needOtherUser(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(sharedTempDir(t), "n")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, h, d)
	ctl := meshctlCopy(t, meshctl)
	for _, args := range [][]string{{"status"}, {"inbox", "--all"}, {"ui"}} {
		r := runAs(t, setpriv, append([]string{ctl, "--home", h}, args...)...)
		want := "hint: run as root: sudo -u root meshctl --home " + h + " " + args[0]
		if r.code != 1 || !strings.Contains(r.stderr, "permission denied") || !strings.Contains(r.stderr, "belongs to root") ||
			!strings.Contains(r.stderr, want) {
			t.Errorf("meshctl %v as uid %d: exit %d\n%s\nwant permission denied and %q", args, otherUser, r.code, r.stderr, want)
		}
		if strings.Contains(r.stderr, "not running") || strings.Contains(r.stderr, "start it with") {
			t.Errorf("meshctl %v as uid %d: tells to start meshd:\n%s", args, otherUser, r.stderr)
		}
	}
}

// TestMeshctlNoDaemonStaleSocket: with no socket meshctl says meshd is not
// running; with a socket nobody listens on, that it was left behind; both
// hint to start meshd.
func TestMeshctlNoDaemonStaleSocket(t *testing.T) {
	testpar.Parallel(t)
	_, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "n")
	meshctlOK(t, meshctl, "--home", h, "init")
	r := meshctlRun(t, meshctl, "--home", h, "status")
	if r.code != 1 || !strings.Contains(r.stderr, "meshd is not running") || !strings.Contains(r.stderr, "hint: start it with: meshd --home "+h) {
		t.Fatalf("no socket: exit %d %q", r.code, r.stderr)
	}
	// A socket file that nobody listens on: bound, then the listener gone.
	ln, err := net.Listen("unix", filepath.Join(h, "meshd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	r = meshctlRun(t, meshctl, "--home", h, "status")
	if r.code != 1 || !strings.Contains(r.stderr, "nothing listens on the control socket") || !strings.Contains(r.stderr, "hint: start it with") {
		t.Fatalf("stale socket: exit %d %q", r.code, r.stderr)
	}
}

// TestDamagedHomeFiles damages each file in a real node's home in turn:
// meshd names the file and the fix, and a --roster that verifies
// replaces a damaged roster.
func TestDamagedHomeFiles(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "n")
	args := []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns"}
	d := startDaemon(t, meshd, h, append(args, "--name", "n")...)
	waitStatus(t, meshctl, h, d)
	meshctlOK(t, meshctl, "--home", h, "channel", "create", "general")
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(h, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(h, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	goodRoster, goodKey, goodPub := read("roster.cbor"), read("identity.key"), read("identity.pub")
	pinned := filepath.Join(t.TempDir(), "roster.cbor")
	if err := os.WriteFile(pinned, goodRoster, 0o644); err != nil {
		t.Fatal(err)
	}
	policies, _ := filepath.Glob(filepath.Join(h, "channels", "*"))
	if len(policies) == 0 {
		t.Fatal("no channel policy file")
	}
	policy := policies[0]
	goodPolicy, _ := os.ReadFile(policy)

	refuse := func(what string, want ...string) {
		t.Helper()
		code, out, _ := runMeshdExit(t, meshd, h, args...)
		if code != 1 {
			t.Fatalf("%s: exit %d, want 1:\n%s", what, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s: output lacks %q:\n%s", what, w, out)
			}
		}
		if strings.Contains(out, "panic") {
			t.Fatalf("%s: panic:\n%s", what, out)
		}
	}

	for _, cut := range [][]byte{goodRoster[:len(goodRoster)/2], nil, []byte("garbage")} {
		write("roster.cbor", cut)
		refuse("damaged roster", filepath.Join(h, "roster.cbor")+" is damaged", "--roster FILE")
	}
	// A --roster that verifies replaces it, and says so.
	d = startDaemon(t, meshd, h, append(args, "--roster", pinned)...)
	waitStatus(t, meshctl, h, d)
	if out := d.stderr.String(); !strings.Contains(out, "the home's roster is damaged; replacing it with --roster") {
		t.Fatalf("no log line about the replaced roster:\n%s", out)
	}
	d.stop(syscall.SIGTERM)
	if got := read("roster.cbor"); string(got) != string(goodRoster) {
		t.Fatal("roster.cbor was not replaced")
	}
	// A --roster that does not verify does not.
	write("roster.cbor", goodRoster[:10])
	bad := filepath.Join(t.TempDir(), "bad.cbor")
	os.WriteFile(bad, []byte("not a roster"), 0o644)
	if code, out, _ := runMeshdExit(t, meshd, h, append(args, "--roster", bad)...); code == 0 || !strings.Contains(out, bad) {
		t.Fatalf("a bad --roster over a damaged roster: exit %d\n%s", code, out)
	}
	write("roster.cbor", goodRoster)

	for _, k := range [][]byte{nil, goodKey[:20], []byte("-----BEGIN MESHD ED25519 PRIVATE KEY-----\nAAAA\n-----END MESHD ED25519 PRIVATE KEY-----\n")} {
		write("identity.key", k)
		refuse("damaged key", filepath.Join(h, "identity.key")+" is damaged", "restore it from a backup")
	}
	write("identity.key", goodKey)
	write("identity.pub", []byte("ed25519:wrong\n"))
	refuse("wrong identity.pub", "remove "+filepath.Join(h, "identity.pub"))
	write("identity.pub", goodPub)
	write("name", []byte("bad\x01name\n"))
	refuse("bad name", filepath.Join(h, "name"), "meshctl init --name NAME")
	os.Remove(filepath.Join(h, "name"))
	write("subscriptions.json", []byte("{\"channels\": "))
	refuse("damaged subscriptions", filepath.Join(h, "subscriptions.json"), "meshctl subscribe NAME")
	os.Remove(filepath.Join(h, "subscriptions.json"))

	// A damaged channel policy is skipped, named, with the fix.
	if err := os.WriteFile(policy, goodPolicy[:len(goodPolicy)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, meshd, h, args...)
	waitStatus(t, meshctl, h, d)
	// meshd logged it before it answered, but the log reaches the test
	// through a pipe and a copying goroutine: wait for it to arrive.
	waitFor(t, "the damaged policy file named with the fix in the log", 10*time.Second, func() bool {
		out := d.stderr.String()
		return strings.Contains(out, policy) && strings.Contains(out, "remove each file named")
	})
}
