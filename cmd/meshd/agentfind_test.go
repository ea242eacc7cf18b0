//go:build linux

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// TestInboxFindReplyRequests: bob's inbox is filtered by sender, kind,
// channel and time, searched, and answered with meshctl reply (in the
// channel, and to the sender of a DM); alice lists the requests she sent
// with their latest status, and meshctl history @bob shows both sides of
// the conversation.
func TestInboxFindReplyRequests(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob", "carol"})
	m.channel("ops")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	chMsg, err := m.client(0).Send(ctx, api.Send{To: "#ops", Body: "deploy started"})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := m.client(0).Send(ctx, api.Send{To: "bob", Body: "there is a Flaky test in pkg/x"})
	if err != nil {
		t.Fatal(err)
	}
	rq, err := m.client(0).Request(ctx, api.Request{To: "bob", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.client(2).Send(ctx, api.Send{To: "bob", Body: "carol says hi"}); err != nil {
		t.Fatal(err)
	}
	m.waitUnread(1, 4, 30*time.Second)

	ids := func(args ...string) []string {
		t.Helper()
		var in api.Inbox
		meshctlJSON(t, m.meshctl, &in, append([]string{"--home", m.homes[1]}, args...)...)
		var out []string
		for _, it := range in.Items {
			out = append(out, it.ID)
		}
		return out
	}
	want := func(got []string, w ...string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Fatalf("got items %v, want %v", got, w)
		}
	}
	want(ids("inbox", "--kind", "request"), rq.ID)
	want(ids("inbox", "--channel", "ops"), chMsg.ID)
	want(ids("inbox", "--channel", "#ops", "--from", "carol"))
	want(ids("inbox", "--from", "alice", "--kind", "message", "--channel", "@"), dm.ID)
	want(ids("inbox", "--from", "alice", "--since", "1h"), chMsg.ID, dm.ID, rq.ID)
	want(ids("inbox", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	want(ids("search", "FLAKY"), dm.ID)
	want(ids("search", "run-tests"), rq.ID)
	want(ids("search", "hi", "--from", "carol"), ids("inbox", "--from", "carol")...)
	if r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "inbox", "--kind", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "--kind") {
		t.Fatalf("inbox --kind bogus: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := meshctlRun(t, m.meshctl, "--home", m.homes[1], "inbox", "--from", "nobody"); r.code != 1 || !strings.Contains(r.stderr, "nobody") {
		t.Fatalf("inbox --from nobody: exit %d, stderr %q", r.code, r.stderr)
	}

	// reply: in the channel, and to a DM's sender, with in_reply_to.
	var inCh, inDM api.Sent
	meshctlJSON(t, m.meshctl, &inCh, "--home", m.homes[1], "reply", chMsg.ID, "ack from bob")
	meshctlJSON(t, m.meshctl, &inDM, "--home", m.homes[1], "reply", dm.ID, "looking at it")
	if inCh.To != "#ops" || inDM.To != "@alice" {
		t.Fatalf("replies went to %q and %q, want #ops and @alice", inCh.To, inDM.To)
	}
	got := m.inboxItem(0, 20*time.Second, func(it api.Item) bool { return it.ID == inCh.ID })
	if got.Channel != "ops" || got.InReplyTo != chMsg.ID || got.Body != "ack from bob" {
		t.Fatalf("alice got the channel reply as %+v", got)
	}
	got = m.inboxItem(0, 20*time.Second, func(it api.Item) bool { return it.ID == inDM.ID })
	if got.Channel != "" || got.InReplyTo != dm.ID {
		t.Fatalf("alice got the DM reply as %+v", got)
	}

	// requests: pending until a final answer.
	listReq := func(args ...string) []api.SentRequest {
		t.Helper()
		var l api.SentRequests
		meshctlJSON(t, m.meshctl, &l, append([]string{"--home", m.homes[0], "requests"}, args...)...)
		return l.Requests
	}
	rs := listReq("--pending")
	if len(rs) != 1 || rs[0].RequestID != rq.RequestID || rs[0].Intent != "run-tests" || !rs[0].Pending || rs[0].To.Name != "bob" {
		t.Fatalf("pending requests: %+v", rs)
	}
	m.ctl(1, "respond", rq.RequestID, "accepted")
	if !testwait.Until(20*time.Second, func() bool {
		rs = listReq("--pending")
		return len(rs) == 1 && rs[0].Status == "accepted"
	}) {
		t.Fatalf("after accepted: %+v", rs)
	}
	m.ctl(1, "respond", rq.RequestID, "completed", "--result", `{"passed":3}`)
	if !testwait.Until(20*time.Second, func() bool {
		rs = listReq()
		return len(rs) == 1 && rs[0].Status == "completed"
	}) {
		t.Fatalf("after completed: %+v", rs)
	}
	if rs[0].Pending || rs[0].Responses != 2 {
		t.Fatalf("a completed request: %+v", rs[0])
	}
	if rs = listReq("--pending"); len(rs) != 0 {
		t.Fatalf("requests --pending after the final answer: %+v", rs)
	}
	if out := m.ctl(0, "requests"); !strings.Contains(out, rq.RequestID) || !strings.Contains(out, "completed") {
		t.Fatalf("meshctl requests:\n%s", out)
	}

	// history @bob on alice: both ways, oldest first.
	var c api.Conversation
	meshctlJSON(t, m.meshctl, &c, "--home", m.homes[0], "history", "@bob")
	var seq []string
	for _, e := range c.Entries {
		dir := "in"
		if e.Out {
			dir = "out"
		}
		seq = append(seq, dir+":"+e.Kind)
	}
	if s := strings.Join(seq, " "); s != "out:message out:request in:message in:response in:response" {
		t.Fatalf("conversation with bob: %s", s)
	}
	if !c.Entries[0].Out || c.Entries[0].ID != dm.ID || c.Entries[0].Delivery != "delivered" {
		t.Fatalf("alice's DM in the conversation: %+v", c.Entries[0])
	}
	out := m.ctl(0, "history", "@bob")
	if !strings.Contains(out, "-> bob id="+dm.ID) || !strings.Contains(out, "<- bob id="+inDM.ID) {
		t.Fatalf("meshctl history @bob:\n%s", out)
	}
	if strings.Contains(out, "carol") {
		t.Fatalf("the conversation with bob shows carol's DM:\n%s", out)
	}
}

// TestReplyRefusesDeliveryFailed: a DM alice queued for bob is refused
// when she removes bob from the roster; the delivery_failed item it
// leaves is listed by inbox --kind delivery_failed, and meshctl reply
// refuses to answer it (it is alice's own message), saying what to do.
func TestReplyRefusesDeliveryFailed(t *testing.T) {
	testpar.Parallel(t)
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"})
	if err := m.ds[1].stop(syscall.SIGTERM); err != nil {
		t.Logf("bob: %v", err)
	}
	var dm api.Sent
	meshctlJSON(t, m.meshctl, &dm, "--home", m.homes[0], "dm", "bob", "are you there?")
	m.ctl(0, "roster", "remove", "bob")
	m.ctl(0, "roster", "publish")
	failed := m.inboxItem(0, 20*time.Second, func(it api.Item) bool { return it.ID == dm.ID })
	if failed.Kind != api.KindDeliveryFailed {
		t.Fatalf("alice's item for her DM: %+v", failed)
	}
	var in api.Inbox
	meshctlJSON(t, m.meshctl, &in, "--home", m.homes[0], "inbox", "--kind", "delivery_failed")
	if len(in.Items) != 1 || in.Items[0].ID != dm.ID {
		t.Fatalf("inbox --kind delivery_failed: %+v", in.Items)
	}
	meshctlJSON(t, m.meshctl, &in, "--home", m.homes[0], "inbox", "--kind", "message")
	if len(in.Items) != 0 {
		t.Fatalf("inbox --kind message lists alice's own failed DM: %+v", in.Items)
	}
	r := meshctlRun(t, m.meshctl, "--home", m.homes[0], "reply", dm.ID, "hello?")
	if r.code != 1 || !strings.Contains(r.stderr, "delivery_failed") {
		t.Fatalf("reply to a delivery_failed item: exit %d, stderr %q", r.code, r.stderr)
	}
}
