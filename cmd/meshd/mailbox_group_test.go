//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// The attacks of a member of the mailbox group on the node's home, run
// against a real meshd that runs as a service user (as the systemd unit
// does), by a second user in the group.
const (
	serviceUID = 65533 // meshd's user
	agentUID   = 65534 // the agent's user (nobody)
	mailGID    = 64997 // the mailbox group
)

// envSwapper, set in a copy of this test binary run as the agent, makes
// it swap two names in a loop (see swapLoop) instead of testing.
const envSwapper = "MESHD_TEST_SWAPPER"

func init() {
	if args := os.Getenv(envSwapper); args != "" {
		os.Exit(swapLoop(strings.Split(args, "|")))
	}
}

// swapLoop swaps the folder a and the link b with renameat2's
// RENAME_EXCHANGE as fast as it can, making the folder need repair before
// each swap, until the file stop exists (or a minute passes).
func swapLoop(args []string) int {
	a, b, stop := args[0], args[1], args[2]
	end := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(end); i++ {
		if i%256 == 0 {
			if _, err := os.Lstat(stop); err == nil {
				return 0
			}
		}
		os.Chmod(a, 0o700)
		os.Chmod(b, 0o700)
		unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	}
	return 0
}

// groupHost is one meshd home run by the service user with a mailbox
// group, and the commands to act as that user or as the agent.
type groupHost struct {
	t              *testing.T
	home, mbox     string
	meshd, meshctl string
}

// as runs argv as uid (its own gid) with the mailbox group, and returns
// the combined output and the error.
func (g *groupHost) as(uid int, env []string, argv ...string) (string, error) {
	g.t.Helper()
	args := []string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid),
		"--groups=" + strconv.Itoa(mailGID), "--"}
	cmd := exec.Command("setpriv", append(args, argv...)...)
	cmd.Env = cleanEnv(append([]string{"HOME=/nonexistent"}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start runs meshd as the service user and waits until it answers.
func (g *groupHost) start() *daemon {
	g.t.Helper()
	cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(serviceUID), "--regid="+strconv.Itoa(serviceUID),
		"--groups="+strconv.Itoa(mailGID), "--", g.meshd, "--home", g.home,
		"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--mailbox-group", strconv.Itoa(mailGID))
	d := startDaemonCmd(g.t, cmd, g.home)
	if !testwait.Until(15*time.Second, func() bool {
		select {
		case <-d.done:
			g.t.Fatalf("meshd exited at start: %v\n%s", d.err, d.stderr.String())
		default:
		}
		_, err := g.as(serviceUID, nil, g.meshctl, "--home", g.home, "status")
		return err == nil
	}) {
		g.t.Fatalf("meshd did not answer within 15s\n%s", d.stderr.String())
	}
	return d
}

// key returns the node's public key, as status reports it.
func (g *groupHost) key() string {
	g.t.Helper()
	out, err := g.as(serviceUID, nil, g.meshctl, "--home", g.home, "status", "--json")
	var s statusJSON
	if err != nil || json.Unmarshal([]byte(out), &s) != nil || s.Key == "" {
		g.t.Fatalf("status: %v\n%s", err, out)
	}
	return s.Key
}

// checkHome fails the test if any file of the home is readable by the
// group or given to it, if the home is listable by it, if the key is not
// the one it was, or if anything of the home reached the mailbox.
func (g *groupHost) checkHome(wantKey string) {
	g.t.Helper()
	fi, err := os.Stat(g.home)
	if err != nil {
		g.t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o710 {
		g.t.Errorf("home: mode %v, want 0710 (the group may pass, not list)", fi.Mode())
	}
	// (roster.cbor is public, 0644: the signed member list.)
	for _, name := range []string{"identity.key", "history.db"} {
		fi, err := os.Lstat(filepath.Join(g.home, name))
		if err != nil {
			g.t.Errorf("%s: %v", name, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm()&0o077 != 0 || st.Gid == mailGID {
			g.t.Errorf("%s: mode %v group %d: open to the mailbox group", name, fi.Mode(), st.Gid)
		}
	}
	if out, err := g.as(agentUID, nil, "cat", filepath.Join(g.home, "identity.key")); err == nil {
		g.t.Errorf("the agent read the key:\n%s", out)
	}
	if out, err := g.as(agentUID, nil, "ls", g.home); err == nil {
		g.t.Errorf("the agent listed the home:\n%s", out)
	}
	failed, _ := os.ReadDir(filepath.Join(g.mbox, "failed"))
	for _, e := range failed {
		if strings.Contains(e.Name(), "identity") || strings.Contains(e.Name(), "history") || strings.Contains(e.Name(), "roster") {
			g.t.Errorf("a file of the home reached failed/: %s", e.Name())
		}
	}
	if k := g.key(); k != wantKey {
		g.t.Errorf("the node's key changed: %s, was %s", k, wantKey)
	}
}

// TestMailboxGroupAttacks: a member of the mailbox group attacks the home
// through the outbox, each way that once worked against a real meshd:
// a folder of its own in the outbox (which stopped every start), a link
// to the home where meshd kept its working state (which moved the key
// and the store into failed/, and made the node a new identity), and a
// folder swapped with a link to the home in a loop while meshd restarts
// (which gave the key to the group). meshd starts each time, and nothing
// in the home becomes readable by the group.
func TestMailboxGroupAttacks(t *testing.T) {
	testpar.Parallel(t)
	requireSetpriv(t)
	meshd, meshctl := buildBinaries(t)
	shared := sharedTempDir(t)
	copyExec := func(src, name string) string {
		p := filepath.Join(shared, name)
		installExec(t, src, p)
		return p
	}
	g := &groupHost{t: t, home: filepath.Join(shared, "bob"),
		meshd: copyExec(meshd, "meshd"), meshctl: copyExec(meshctl, "meshctl")}
	g.mbox = filepath.Join(g.home, "mailbox")
	if err := os.Mkdir(g.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(g.home, serviceUID, serviceUID); err != nil {
		t.Fatal(err)
	}
	if out, err := g.as(serviceUID, nil, g.meshctl, "--home", g.home, "init", "--name", "bob"); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	d := g.start()
	key := g.key()
	outbox := filepath.Join(g.mbox, "outbox")
	if fi, err := os.Stat(outbox); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("outbox: %v, want sticky (err %v)", fi.Mode(), err)
	}
	restart := func(what string) {
		t.Helper()
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("%s: stop: %v", what, err)
		}
		d = g.start()
	}

	// 1. A folder of the agent's own in the outbox.
	agent := func(script string) {
		t.Helper()
		if out, err := g.as(agentUID, nil, "sh", "-c", script); err != nil {
			t.Fatalf("as the agent: %s: %v\n%s", script, err, out)
		}
	}
	agent("mkdir -m700 " + filepath.Join(outbox, "x"))
	restart("a member's folder in the outbox")
	if fi, err := os.Stat(filepath.Join(outbox, "x")); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != agentUID {
		t.Errorf("the member's folder was changed: %v %v", fi.Mode(), err)
	}
	g.checkHome(key)
	// A folder under a name the outbox takes cannot be moved by meshd's
	// user: it is named in the log once, not at every scan, and files
	// after it still go.
	agent("mkdir -m700 " + filepath.Join(outbox, "a-dir.txt"))
	waitUntil(t, 10*time.Second, "the log line for a folder in the outbox", func() bool {
		return strings.Contains(d.stderr.String(), "cannot take this entry")
	})
	for i := range 3 {
		name := "z" + strconv.Itoa(i) + ".txt"
		agent("printf 'To: #none\n---\nx\n' > " + filepath.Join(outbox, "."+name) + " && mv " + filepath.Join(outbox, "."+name) + " " + filepath.Join(outbox, name))
		waitUntil(t, 10*time.Second, name+" taken", func() bool {
			_, err := os.Stat(filepath.Join(outbox, name))
			return os.IsNotExist(err)
		})
	}
	if n := strings.Count(d.stderr.String(), "cannot take this entry"); n != 1 {
		t.Errorf("the folder was logged %d times, want once", n)
	}

	// 2. A link to the home where meshd kept files being sent.
	agent("mv -T " + filepath.Join(outbox, ".processing") + " " + filepath.Join(outbox, ".old") + " 2>/dev/null; " +
		"ln -s " + g.home + " " + filepath.Join(outbox, ".processing"))
	// meshd's working state is out of the group's reach now.
	if out, err := g.as(agentUID, nil, "sh", "-c", "mv -T "+filepath.Join(g.mbox, ".processing")+" "+filepath.Join(outbox, "p")); err == nil {
		t.Errorf("the agent moved meshd's .processing:\n%s", out)
	}
	restart("a link to the home as outbox/.processing")
	g.checkHome(key)

	// 3. A folder that needs repair, swapped with a link to the home in a
	// loop while meshd restarts.
	a, b, stop := filepath.Join(outbox, "d"), filepath.Join(outbox, "l"), filepath.Join(shared, "stop")
	agent("mkdir -m700 " + a + " && ln -s " + g.home + " " + b)
	swapper := copyExec(os.Args[0], "swapper")
	sw := exec.Command("setpriv", "--reuid="+strconv.Itoa(agentUID), "--regid="+strconv.Itoa(agentUID),
		"--groups="+strconv.Itoa(mailGID), "--", swapper)
	sw.Env = cleanEnv(envSwapper + "=" + a + "|" + b + "|" + stop)
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	swapDone := make(chan error, 1)
	go func() { swapDone <- sw.Wait() }()
	const starts = 8
	for i := range starts {
		restart("start " + strconv.Itoa(i) + " during the swaps")
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-swapDone:
		if err != nil {
			t.Errorf("swapper: %v", err)
		}
	case <-time.After(30 * time.Second):
		sw.Process.Kill()
		t.Fatal("the swapper did not stop")
	}
	g.checkHome(key)
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d starts during the swaps; the home stayed the service user's", starts)
}
