package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// send sends body to to from node name through the control API.
func (o *histOrg) send(name, to, body string) *api.Sent {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := o.client(name).Send(ctx, api.Send{To: to, Body: body})
	if err != nil {
		o.t.Fatalf("%s: send to %s: %v", name, to, err)
	}
	return s
}

// channelOf returns node name's view of channel ch.
func (o *histOrg) channelOf(name, ch string) api.Channel {
	o.t.Helper()
	var c api.Channel
	if err := json.Unmarshal([]byte(o.ctl(name, "channel", "show", ch, "--json")), &c); err != nil {
		o.t.Fatal(err)
	}
	return c
}

// waitVersion waits until every node named holds version v of ch.
func (o *histOrg) waitVersion(ch string, v uint64, names ...string) {
	o.t.Helper()
	for _, n := range names {
		waitFor(o.t, fmt.Sprintf("%s holding %s v%d", n, ch, v), 10*time.Second, func() bool { return o.channelOf(n, ch).Version >= v })
	}
}

// waitHistory waits until node name's history of ch holds id.
func (o *histOrg) waitHistory(name, ch, id string) {
	o.t.Helper()
	waitFor(o.t, name+" storing "+id+" in "+ch, 15*time.Second, func() bool { return o.historyIDs(name, ch)[id] })
}

// inboxHas reports whether node name's inbox holds item id.
func (o *histOrg) inboxHas(name, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := o.client(name).Inbox(ctx, api.InboxQuery{All: true})
	if err != nil {
		o.t.Fatalf("%s: inbox: %v", name, err)
	}
	for _, it := range in.Items {
		if it.ID == id {
			return true
		}
	}
	return false
}

// TestChannelAdministration changes a channel's policy on a running mesh
// of three meshd processes: a writer added may post, a reader removed
// stops receiving, history off stops catch-up, a deleted channel is
// refused everywhere, and channel show lists the versions and signers.
func TestChannelAdministration(t *testing.T) {
	testpar.Parallel(t)
	o := newHistOrg(t, "a", "b", "c")
	o.ctl("a", "channel", "create", "ops", "--writers", "a")
	o.ctl("a", "channel", "create", "open")
	for _, n := range []string{"b", "c"} {
		o.waitChannel(n, "ops")
		o.waitChannel(n, "open")
		o.ctl(n, "subscribe", "ops")
		o.ctl(n, "subscribe", "open")
	}

	// A writer added can post.
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "send", "#ops", "too early"); r.code == 0 || !strings.Contains(r.stderr, "not a writer") {
		t.Fatalf("b posted before it was a writer: %d %s", r.code, r.stderr)
	}
	o.ctl("a", "channel", "set", "ops", "--writers", "a,b")
	o.waitVersion("ops", 2, "b", "c")
	fromB := o.send("b", "#ops", "b may write now")
	o.waitHistory("a", "ops", fromB.ID)

	// A reader removed stops receiving: c is no reader of v3. A DM sent
	// after the channel message, on the same ordered link, bounds the wait.
	o.ctl("a", "channel", "set", "ops", "--readers", "a,b")
	o.waitVersion("ops", 3, "b", "c")
	secret := o.send("a", "#ops", "not for c")
	o.waitHistory("b", "ops", secret.ID)
	marker := o.send("a", "c", "marker")
	waitFor(t, "c receiving the marker DM", 10*time.Second, func() bool { return o.inboxHas("c", marker.ID) })
	if o.inboxHas("c", secret.ID) || o.historyIDs("c", "ops")[secret.ID] {
		t.Fatal("c, removed from the readers, still received #ops")
	}

	// History off stops catch-up: b misses one message on each channel
	// while stopped; on restart it catches up #open only.
	o.ctl("a", "channel", "set", "ops", "--history", "off")
	o.waitVersion("ops", 4, "b")
	if err := o.ds["b"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	missedOps := o.send("a", "#ops", "missed on ops")
	missedOpen := o.send("a", "#open", "missed on open")
	o.start("b")
	o.waitHistory("b", "open", missedOpen.ID)
	if o.historyIDs("b", "ops")[missedOps.ID] {
		t.Fatal("b caught up #ops although its history fetch is off")
	}

	// Versions and signers.
	c := o.channelOf("a", "ops")
	if len(c.Versions) != 4 || c.Versions[3].History || len(c.Versions[2].Readers) != 2 {
		t.Fatalf("versions of #ops: %+v", c.Versions)
	}
	for _, v := range c.Versions {
		if len(v.Signers) != 1 || !strings.HasPrefix(v.Signers[0], "a ") {
			t.Fatalf("v%d signed by %v, want a", v.Version, v.Signers)
		}
	}
	if txt := o.ctl("a", "channel", "show", "ops"); !strings.Contains(txt, "versions:") || !strings.Contains(txt, "v4") {
		t.Fatalf("channel show lists no versions:\n%s", txt)
	}

	// A deleted channel stops delivering everywhere.
	o.ctl("a", "channel", "delete", "open")
	o.waitVersion("open", 2, "b", "c")
	for _, n := range o.names {
		// A node drops its subscription just after it applies the
		// tombstone.
		waitFor(t, n+" dropping #open", 10*time.Second, func() bool {
			ch := o.channelOf(n, "open")
			return ch.Deleted && ch.Subscription == "unsubscribed" && !ch.CanRead && !ch.CanWrite
		})
		if r := meshctlRun(t, o.meshctl, "--home", o.homes[n], "send", "#open", "after delete"); r.code == 0 || !strings.Contains(r.stderr, "was deleted") {
			t.Fatalf("%s: send to a deleted channel: %d %s", n, r.code, r.stderr)
		}
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "subscribe", "open"); r.code == 0 || !strings.Contains(r.stderr, "was deleted") {
		t.Fatalf("subscribing to a deleted channel: %d %s", r.code, r.stderr)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["a"], "channel", "set", "open", "--history", "on"); r.code == 0 || !strings.Contains(r.stderr, "restore it") {
		t.Fatalf("editing a deleted channel without readers: %d %s", r.code, r.stderr)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["a"], "channel", "delete", "open"); r.code == 0 || !strings.Contains(r.stderr, "already deleted") {
		t.Fatalf("deleting twice: %d %s", r.code, r.stderr)
	}
	if r := meshctlRun(t, o.meshctl, "--home", o.homes["b"], "channel", "set", "ops", "--history", "on"); r.code == 0 || !strings.Contains(r.stderr, "only roster admins") {
		t.Fatalf("a member changed a policy: %d %s", r.code, r.stderr)
	}
}
