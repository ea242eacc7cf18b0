package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// mailboxBodies returns the message bodies of node's mirror files, sorted.
func (o *histOrg) mailboxBodies(node string) []string {
	o.t.Helper()
	var out []string
	for _, f := range mirrorFiles(o.homes[node]) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed meanwhile
		}
		_, rest, _ := strings.Cut(string(b), "\n---\n")
		body, _, _ := strings.Cut(rest, "\n-----BEGIN MESHD ENVELOPE-----")
		out = append(out, strings.TrimSuffix(body, "\n"))
	}
	slices.Sort(out)
	return out
}

// readAll marks every inbox item of node read with `meshctl read`.
func (o *histOrg) readAll(node string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []string
	err := o.client(node).InboxPages(ctx, api.InboxQuery{Cursor: api.CursorStart}, 10*time.Second, func(in *api.Inbox) error {
		for _, it := range in.Items {
			ids = append(ids, it.ID)
		}
		return nil
	})
	if err != nil {
		o.t.Fatal(err)
	}
	for _, id := range ids {
		o.ctl(node, "read", id)
	}
}

// mailboxOrg is alice and bob, bob restarted with args, and channel
// #small that keeps 3 messages, which bob reads.
func mailboxOrg(t *testing.T, args ...string) *histOrg {
	o := newHistOrg(t, "alice", "bob")
	o.ctl("alice", "channel", "create", "small", "--retention-messages", "3")
	o.waitChannel("bob", "small")
	o.ctl("bob", "subscribe", "small")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.args["bob"] = append(o.args["bob"], args...)
	o.start("bob")
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 15*time.Second)
	return o
}

func mailboxStatus(t *testing.T, o *histOrg, node string) *api.MailboxStatus {
	var st api.Status
	meshctlJSON(t, o.meshctl, &st, "--home", o.homes[node], "status", "--json")
	if st.Mailbox == nil {
		t.Fatal("status --json has no mailbox")
	}
	return st.Mailbox
}

// TestMailboxFilesFollowRetention: #small keeps 3 messages. bob gets 6
// (6 files: unread items are kept whatever the count), reads them, and
// the next retention pass removes the 3 oldest from the store and their
// mailbox files with them.
func TestMailboxFilesFollowRetention(t *testing.T) {
	testpar.Parallel(t)
	o := mailboxOrg(t, "--retention-interval", "1s")
	var want []string
	for i := range 6 {
		body := fmt.Sprintf("small %d", i)
		o.ctl("alice", "send", "#small", body)
		want = append(want, body)
	}
	waitFor(t, "bob's 6 mailbox files", 15*time.Second, func() bool { return len(mirrorFiles(o.homes["bob"])) == 6 })
	o.readAll("bob")
	waitFor(t, "retention to remove the 3 oldest files", 15*time.Second, func() bool { return len(mirrorFiles(o.homes["bob"])) == 3 })
	if got := o.mailboxBodies("bob"); !slices.Equal(got, want[3:]) {
		t.Fatalf("bob's mailbox holds %q, want the 3 newest %q", got, want[3:])
	}
	// The pass counts what it pruned once it ends, after the files went.
	var c map[string]uint64
	waitFor(t, "the retention pass to count what it pruned", 15*time.Second, func() bool {
		c = counters(t, o.meshctl, o.homes["bob"])
		return c["retention.pruned.channel"] >= 3
	})
	if c["mirror.pruned"] != 3 || c["retention.pruned.channel"] != 3 {
		t.Fatalf("mirror.pruned %d, retention.pruned.channel %d; want 3 and 3", c["mirror.pruned"], c["retention.pruned.channel"])
	}
	if mb := mailboxStatus(t, o, "bob"); mb.Files != 3 {
		t.Fatalf("status counts %d mailbox files, want 3", mb.Files)
	}
}

// TestMailboxQuotaPausesAndResumes: bob's mailbox holds at most 4 files.
// Of 6 messages, 4 get files and the mirror pauses (warning, counter,
// status); once bob has read them and retention has removed the 3
// oldest with their files, the mirror resumes on its own and writes the
// files it held back, of the messages still stored.
func TestMailboxQuotaPausesAndResumes(t *testing.T) {
	testpar.Parallel(t)
	o := mailboxOrg(t, "--retention-interval", "1s", "--mailbox-max-files", "4")
	var want []string
	for i := range 6 {
		body := fmt.Sprintf("small %d", i)
		o.ctl("alice", "send", "#small", body)
		want = append(want, body)
	}
	waitFor(t, "bob to store all 6", 15*time.Second, func() bool { return o.unreadFrom("bob")["alice"] == 6 })
	waitFor(t, "the mirror to pause", 15*time.Second, func() bool { return mailboxStatus(t, o, "bob").Paused == "files" })
	if n := len(mirrorFiles(o.homes["bob"])); n != 4 {
		t.Fatalf("%d files past a quota of 4", n)
	}
	if st := o.ctl("bob", "status"); !strings.Contains(st, "PAUSED") || !strings.Contains(st, "mailbox_max_files") {
		t.Fatalf("meshctl status does not say the mirror is paused:\n%s", st)
	}
	c := counters(t, o.meshctl, o.homes["bob"])
	if c["mirror.paused.files"] != 1 || c["mirror.held_back"] < 2 {
		t.Fatalf("mirror.paused.files %d, mirror.held_back %d; want 1 and at least 2", c["mirror.paused.files"], c["mirror.held_back"])
	}
	if n := strings.Count(o.ds["bob"].stderr.String(), "mailbox mirror paused"); n != 1 {
		t.Fatalf("pause logged %d times, want once", n)
	}

	o.readAll("bob")
	waitFor(t, "the mirror to resume and write the files it held back", 20*time.Second, func() bool {
		return slices.Equal(o.mailboxBodies("bob"), want[3:])
	})
	waitFor(t, "status to show the mirror running", 10*time.Second, func() bool { return mailboxStatus(t, o, "bob").Paused == "" })
	o.ds["bob"].waitLog("mailbox mirror resumed", 5*time.Second)
}

// TestMailboxLowDiskPauses: bob's watermark is above the real free space
// (mailbox_min_free_mib of 1 PiB), so a DM to bob is stored but gets no
// file, and the mirror says why. Restarted with the default watermark,
// bob writes the file it missed.
func TestMailboxLowDiskPauses(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "alice", "bob")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	plain := o.args["bob"]
	o.args["bob"] = append(slices.Clone(plain), "--mailbox-min-free-mib", "1073741824")
	o.start("bob")
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 15*time.Second)
	o.ctl("alice", "dm", "bob", "while the disk is low")
	waitFor(t, "bob to store the DM", 15*time.Second, func() bool { return o.unreadFrom("bob")["alice"] == 1 })
	waitFor(t, "the mirror to pause", 15*time.Second, func() bool { return mailboxStatus(t, o, "bob").Paused == "free_space" })
	o.ds["bob"].waitLog("mailbox mirror paused: free disk space is below mailbox_min_free_mib", 5*time.Second)
	if n := len(mirrorFiles(o.homes["bob"])); n != 0 {
		t.Fatalf("%d files written below the watermark", n)
	}
	if c := counters(t, o.meshctl, o.homes["bob"]); c["mirror.paused.free_space"] != 1 {
		t.Fatalf("mirror.paused.free_space = %d, want 1", c["mirror.paused.free_space"])
	}
	if st := o.ctl("bob", "status"); !strings.Contains(st, "PAUSED") || !strings.Contains(st, "mailbox_min_free_mib") {
		t.Fatalf("meshctl status does not say the mirror is paused:\n%s", st)
	}
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.args["bob"] = plain
	o.start("bob")
	waitFor(t, "the file it missed", 15*time.Second, func() bool {
		return slices.Equal(o.mailboxBodies("bob"), []string{"while the disk is low"})
	})
}
