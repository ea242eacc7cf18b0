package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// TestBlockMember: b blocks c. c's DM and channel message are stored in
// b's history and counted as drop.blocked, but reach neither b's inbox
// nor its mailbox, while a's still do; c stays linked. The block is in
// meshctl status and blocks, survives a restart, and unblock lets c's
// next DM in.
func TestBlockMember(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "a", "b", "c")
	o.ctl("a", "channel", "create", "general")
	o.waitChannel("b", "general")
	o.waitChannel("c", "general")
	o.ctl("b", "subscribe", "general")

	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "block", "nobody"); r.code == 0 || !strings.Contains(r.stderr, "nobody") {
		t.Fatalf("blocking an unknown member: %d %s", r.code, r.stderr)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "block", "b"); r.code == 0 || !strings.Contains(r.stderr, "itself") {
		t.Fatalf("blocking itself: %d %s", r.code, r.stderr)
	}
	var bl api.Block
	meshctlJSON(t, o.meshctl, &bl, "--home", o.homes["b"], "block", "c")
	if !bl.Blocked || bl.Name != "c" {
		t.Fatalf("block answered %+v", bl)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "block", "c"); r.code == 0 || !strings.Contains(r.stderr, "already blocked") {
		t.Fatalf("blocking twice: %d %s", r.code, r.stderr)
	}

	blockedDrops := func() uint64 { return counters(t, o.meshctl, o.homes["b"])["drop.blocked"] }
	dm := o.send("c", "b", "let me in")
	post := o.send("c", "#general", "noise")
	fromA := o.send("a", "b", "from a")
	waitFor(t, "b counting c's two envelopes as blocked", 15*time.Second, func() bool { return blockedDrops() == 2 })
	waitFor(t, "a's DM in b's inbox", 15*time.Second, func() bool { return o.inboxHas("b", fromA.ID) })
	o.waitHistory("b", "general", post.ID)
	for _, id := range []string{dm.ID, post.ID} {
		if o.inboxHas("b", id) {
			t.Fatalf("%s from blocked c reached b's inbox", id)
		}
		if len(mailboxFilesWithID(t, o.homes["b"], id)) != 0 {
			t.Fatalf("%s from blocked c reached b's mailbox", id)
		}
	}
	if len(mailboxFilesWithID(t, o.homes["b"], fromA.ID)) != 1 {
		t.Fatal("a's DM is not in b's mailbox")
	}
	if peers := peerKeys(t, o.meshctl, o.homes["c"]); len(peers) != 2 {
		t.Fatalf("c's links after the block: %v", peers)
	}
	if txt := o.ctl("b", "status"); !strings.Contains(txt, "blocked") || !strings.Contains(txt, "c (") {
		t.Fatalf("status does not list the block:\n%s", txt)
	}

	// The block survives a restart.
	if err := o.ds["b"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.start("b")
	waitPeers(t, o.meshctl, o.homes["b"], 2, 15*time.Second)
	var bs api.Blocks
	meshctlJSON(t, o.meshctl, &bs, "--home", o.homes["b"], "blocks")
	if len(bs.Blocks) != 1 || bs.Blocks[0].Name != "c" {
		t.Fatalf("blocks after restart: %+v", bs)
	}
	again := o.send("c", "b", "still me")
	waitFor(t, "b counting c's DM after the restart", 15*time.Second, func() bool { return blockedDrops() == 1 })
	if o.inboxHas("b", again.ID) {
		t.Fatal("c's DM reached b's inbox after a restart")
	}

	// Unblocked, c's next DM gets through.
	o.ctl("b", "unblock", "c")
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "unblock", "c"); r.code == 0 || !strings.Contains(r.stderr, "not blocked") {
		t.Fatalf("unblocking twice: %d %s", r.code, r.stderr)
	}
	welcome := o.send("c", "b", "thanks")
	waitFor(t, "c's DM in b's inbox after unblock", 15*time.Second, func() bool { return o.inboxHas("b", welcome.ID) })
	if txt := o.ctl("b", "blocks"); !strings.Contains(txt, "no member is blocked") {
		t.Fatalf("blocks after unblock:\n%s", txt)
	}
}
