//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// TestAttachmentMailboxGroup: with mailbox_group, an attachment in bob's
// mailbox (a hard link to his blob store's copy) is readable by a member
// of the group, as message files are, and never writable by it: the
// member, another user, can neither write, rename, remove nor replace the
// file, change its mode, nor add to or rename its folders, so it cannot
// change the stored blob through the link. A file replaced by meshd's own
// user (or root) is caught by meshctl verify.
func TestAttachmentMailboxGroup(t *testing.T) {
	testpar.Parallel(t)
	requireSetpriv(t)
	const gid = 64996
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--mailbox-group", strconv.Itoa(gid))
	// Let other users reach the homes' parent (not list it), as on a real
	// host where /var/lib or /home is 0755.
	for d := filepath.Dir(m.homes[1]); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	content := strings.Repeat("--- a/x.go\n+++ b/x.go\n", 20000) // 440 KB: two chunks
	file := filepath.Join(t.TempDir(), "fix.patch")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "please review", "--attach", file)
	p := m.attachedPath(1, sent.ID, "fix.patch", 30*time.Second)
	dir := filepath.Dir(p)
	attachments := filepath.Dir(dir)
	day := filepath.Dir(attachments)

	// The modes, as meshd's user sees them.
	for _, d := range []string{day, attachments, dir} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Mode()&(os.ModePerm|os.ModeSetgid) != 0o750|os.ModeSetgid || st.Gid != gid {
			t.Errorf("%s: mode %v gid %d, want 0750 setgid and gid %d", d, fi.Mode(), st.Gid, gid)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o440 || st.Gid != gid || st.Nlink < 2 {
		t.Errorf("%s: mode %v gid %d links %d, want 0440, gid %d, a hard link to the blob", p, fi.Mode(), st.Gid, st.Nlink, gid)
	}
	blob := filepath.Join(m.homes[1], "blobs", "data", sha([]byte(content)))
	if bi, err := os.Stat(blob); err != nil || !os.SameFile(fi, bi) {
		t.Fatalf("the mailbox file is not the store's blob %s: %v", blob, err)
	}

	// The agent, a member of the group: reads, and nothing else.
	member := []int{gid}
	if out, err := asOtherUser(t, member, "cat", p); err != nil || out != content {
		t.Fatalf("a member of the mailbox group cannot read the attachment: %v (%d bytes)", err, len(out))
	}
	if out, err := asOtherUser(t, member, "ls", dir); err != nil || !strings.Contains(out, "fix.patch") {
		t.Fatalf("a member of the mailbox group cannot list the attachment's folder: %v\n%s", err, out)
	}
	attacks := []string{
		"printf x >> " + p,           // append to the blob through the link
		"printf x > " + p,            // truncate and rewrite it
		"chmod 666 " + p,             // make it writable
		"mv " + p + " " + p + ".old", // rename it
		"rm -f " + p,                 // remove it
		"ln -f /etc/hostname " + p,   // replace it with a link
		"printf x > " + filepath.Join(dir, "other.txt"),  // add a file beside it
		"mv " + dir + " " + dir + ".old",                 // rename its folder
		"mkdir " + filepath.Join(attachments, "x"),       // add a folder
		"mv " + attachments + " " + attachments + ".old", // rename attachments/
		"cat " + blob, // read the store itself
		"printf x >> " + filepath.Join(m.homes[1], "blobs"), // reach the store's folder
	}
	if b, _ := os.ReadFile("/proc/sys/fs/protected_hardlinks"); strings.TrimSpace(string(b)) == "1" {
		// A link of its own would keep the blob's inode, and its disk,
		// after retention removed it; the kernel refuses a link to a file
		// the member may not write.
		keep := filepath.Join(os.TempDir(), "meshd-attach-link-"+strconv.Itoa(os.Getpid()))
		t.Cleanup(func() { os.Remove(keep) })
		attacks = append(attacks, "ln "+p+" "+keep)
	}
	for _, a := range attacks {
		if out, err := asOtherUser(t, member, "sh", "-c", a); err == nil {
			t.Errorf("a member of the mailbox group could: %s\n%s", a, out)
		}
	}
	if got, err := os.ReadFile(blob); err != nil || string(got) != content {
		t.Fatalf("the stored blob changed: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the attachment is gone: %v", err)
	}
	// Control: the agent runs commands here, so the refusals above are
	// the modes', not a broken setpriv.
	if out, err := asOtherUser(t, member, "sh", "-c", "printf x >> /dev/null"); err != nil {
		t.Fatalf("setpriv does not work here: %v\n%s", err, out)
	}

	// Replaced by other means (meshd's user may): meshctl verify says so.
	tag := sent.ID[len(sent.ID)-12:]
	msgs, _ := filepath.Glob(filepath.Join(m.homes[1], "mailbox", "*", "*", "*-"+tag+".txt"))
	if len(msgs) != 1 {
		t.Fatalf("%d mailbox files for %s", len(msgs), sent.ID)
	}
	if out := m.ctl(1, "verify", msgs[0]); !strings.Contains(out, "attachments: fix.patch verified") {
		t.Fatalf("meshctl verify: %s", out)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, len(content)), 0o440); err != nil {
		t.Fatal(err)
	}
	if r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "verify", msgs[0]); r.code == 0 || !strings.Contains(r.stderr, "does not match its signed SHA-256") {
		t.Fatalf("verify of a replaced attachment: exit %d, %s", r.code, r.stderr)
	}
	if got, err := os.ReadFile(blob); err != nil || string(got) != content {
		t.Fatalf("the stored blob changed with the mailbox file: %v", err)
	}
}
