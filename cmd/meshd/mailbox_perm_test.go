//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// asOtherUser runs argv as uid and gid 65534 (nobody) with the given
// supplementary groups (none: --clear-groups), through setpriv.
func asOtherUser(t *testing.T, groups []int, argv ...string) (string, error) {
	t.Helper()
	args := []string{"--reuid=65534", "--regid=65534"}
	if len(groups) == 0 {
		args = append(args, "--clear-groups")
	} else {
		var gs []string
		for _, g := range groups {
			gs = append(gs, strconv.Itoa(g))
		}
		args = append(args, "--groups="+strings.Join(gs, ","))
	}
	out, err := exec.Command("setpriv", append(append(args, "--"), argv...)...).CombinedOutput()
	return string(out), err
}

// requireSetpriv skips unless the test runs as root with setpriv.
func requireSetpriv(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a command as another user needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
}

// TestMailboxOwnerOnly: another local user can neither list bob's mailbox
// nor read a DM's file; with mailbox_group, a member of that group can do
// both, and one outside it still cannot.
func TestMailboxOwnerOnly(t *testing.T) {
	testpar.Parallel(t)
	requireSetpriv(t)
	meshctl, homes, ds, pinned, seed := twoNodes(t)
	// Let the other user reach the homes' parent (not list it), as on a
	// real host where /var/lib or /home is 0755.
	for d := filepath.Dir(homes["bob"]); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	meshctlOK(t, meshctl, "--home", homes["alice"], "dm", "bob", "for bob's eyes only")
	var file string
	waitUntil(t, 10*time.Second, "bob's mailbox file", func() bool {
		fs := mirrorFiles(homes["bob"])
		if len(fs) == 1 {
			file = fs[0]
		}
		return file != ""
	})
	for _, p := range []string{homes["bob"], filepath.Join(homes["bob"], "mailbox"), filepath.Dir(file), file} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want owner only", p, fi.Mode())
		}
	}
	mailbox := filepath.Join(homes["bob"], "mailbox")
	if out, err := asOtherUser(t, nil, "cat", file); err == nil || strings.Contains(out, "for bob's eyes only") {
		t.Fatalf("another user read the DM: %v\n%s", err, out)
	}
	if out, err := asOtherUser(t, nil, "ls", mailbox); err == nil {
		t.Fatalf("another user listed the mailbox:\n%s", out)
	}
	// Control: nobody can run commands at all here.
	if out, err := asOtherUser(t, nil, "true"); err != nil {
		t.Fatalf("setpriv does not work here: %v\n%s", err, out)
	}

	// Restart bob with a mailbox group (any gid: root may give files to
	// it). A member reads and lists; a non-member still cannot.
	const gid = 64999
	if err := ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	meshd, _ := buildBinaries(t)
	ds["bob"] = startDaemon(t, meshd, homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--roster", pinned, "--seed", seed,
		"--mailbox-group", strconv.Itoa(gid))
	waitStatus(t, meshctl, homes["bob"], ds["bob"])
	if !strings.Contains(ds["bob"].stderr.String(), "permissions repaired") {
		t.Errorf("the change of mode was not logged:\n%s", ds["bob"].stderr.String())
	}
	meshctlOK(t, meshctl, "--home", homes["alice"], "dm", "bob", "for the group too")
	var second string
	waitUntil(t, 10*time.Second, "bob's second mailbox file", func() bool {
		for _, f := range mirrorFiles(homes["bob"]) {
			if f != file {
				second = f
			}
		}
		return second != ""
	})
	fi, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o640 || st.Gid != gid {
		t.Errorf("%s: mode %v gid %d, want 0640 and gid %d", second, fi.Mode(), st.Gid, gid)
	}
	if out, err := asOtherUser(t, []int{gid}, "cat", second); err != nil || !strings.Contains(out, "for the group too") {
		t.Fatalf("a member of the mailbox group cannot read the DM: %v\n%s", err, out)
	}
	if out, err := asOtherUser(t, []int{gid}, "ls", filepath.Dir(second)); err != nil || !strings.Contains(out, filepath.Base(second)) {
		t.Fatalf("a member of the mailbox group cannot list the inbox: %v\n%s", err, out)
	}
	if out, err := asOtherUser(t, []int{gid}, "ls", homes["bob"]); err == nil {
		t.Errorf("a member of the mailbox group listed the home:\n%s", out)
	}
	if out, err := asOtherUser(t, []int{gid}, "cat", filepath.Join(homes["bob"], "identity.key")); err == nil {
		t.Errorf("a member of the mailbox group read the key:\n%s", out)
	}
	if out, err := asOtherUser(t, nil, "cat", second); err == nil {
		t.Fatalf("a user outside the group read the DM:\n%s", out)
	}
}

// waitUntil polls cond for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}
