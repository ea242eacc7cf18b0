package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// chanMsg signs a channel Message of m's with ts now+ahead.
func (m *rawMember) chanMsg(ch uuid.UUID, ahead time.Duration, body string) *proto.SignedEnvelope {
	m.t.Helper()
	m.seq++
	se, err := proto.SignEnvelope(m.key, &proto.Envelope{ID: proto.NewID(), From: m.pub, To: proto.ToChannel(ch),
		Kind: proto.KindMessage, TS: time.Now().Add(ahead).UnixMilli(), TTL: 300, Seq: m.seq, Epoch: m.ep,
		Message: &proto.Message{Body: body}})
	if err != nil {
		m.t.Fatal(err)
	}
	return se
}

// sendAll sends se on every link, waiting while a link's queue is full.
func sendAll(t *testing.T, links []*transport.Link, se *proto.SignedEnvelope) {
	t.Helper()
	frame := append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range links {
		if err := l.SendWait(ctx, frame); err != nil {
			t.Fatalf("a link's send queue stayed full for 30 s: %v", err)
		}
	}
}

// channelID returns the id of channel name on node.
func (o *histOrg) channelID(node, name string) uuid.UUID {
	o.t.Helper()
	var ch api.Channel
	meshctlJSON(o.t, o.meshctl, &ch, "--home", o.homes[node], "channel", "show", name, "--json")
	id, err := uuid.Parse(ch.ID)
	if err != nil {
		o.t.Fatal(err)
	}
	return id
}

// unreadFrom counts node's unread inbox items by sender name.
func (o *histOrg) unreadFrom(node string) map[string]int {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]int{}
	err := o.client(node).InboxPages(ctx, api.InboxQuery{Cursor: api.CursorStart}, 10*time.Second, func(in *api.Inbox) error {
		for _, it := range in.Items {
			out[it.From.Name]++
		}
		return nil
	})
	if err != nil {
		o.t.Fatal(err)
	}
	return out
}

// storedFrom counts the channel's messages in node's store by sender
// name, and returns the total the store holds.
func (o *histOrg) storedFrom(node, ch string) (map[string]int, int) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := o.client(node).History(ctx, api.HistoryQuery{Channel: ch, Limit: api.MaxHistoryLimit})
	if err != nil {
		o.t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range h.Messages {
		out[m.From.Name]++
	}
	return out, h.Stored
}

// TestChannelFloodKeepsOthers reproduces the flood of docs/SECURITY.md
// "Channel floods" against real meshd processes: mal, a member, sends
// 1,200 small channel messages stamped 20 s ahead of the clock to bob
// (subscribed: the messages are inbox items) and carol (a reader that
// did not subscribe). Their channel quota is raised so that the whole
// flood is stored and the channel's retention count (1,000 messages, set
// at its creation; 10,000 by default) is what decides. After the
// retention pass, alice's messages are still in both stores, bob still
// has them unread, and carol's store was cut to 1,000 by removing mal's
// oldest.
func TestChannelFloodKeepsOthers(t *testing.T) {
	// Parallel: with a retention count of 1,000 its flood is an eighth of
	// the 10,200 messages it sent past the default count, when it ran
	// alone because its CPU starved the tests beside it.
	testpar.Parallel(t)
	const (
		flood = 1_200
		keep  = 1_000
	)
	mal := newRawMember(t)
	o := newHistOrgWith(t, map[string]proto.PubKey{"mal": mal.pub}, "alice", "bob", "carol")
	o.ctl("alice", "channel", "create", "general", "--retention-messages", strconv.Itoa(keep))
	o.waitChannel("bob", "general")
	o.waitChannel("carol", "general")
	o.ctl("bob", "subscribe", "general")
	for _, n := range []string{"bob", "carol"} {
		if err := o.ds[n].stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		o.args[n] = append(o.args[n], "--retention-interval", "1s", "--channel-sender-burst", "20000")
		o.start(n)
	}
	waitPeers(t, o.meshctl, o.homes["alice"], 2, 15*time.Second)
	for i := range 5 {
		o.ctl("alice", "send", "#general", fmt.Sprintf("alice before the flood %d", i))
	}
	for _, n := range []string{"bob", "carol"} {
		waitFor(t, n+" to store alice's 5 messages", 15*time.Second, func() bool {
			from, _ := o.storedFrom(n, "general")
			return from["alice"] == 5
		})
	}
	ch := o.channelID("alice", "general")
	var links []*transport.Link
	for _, n := range []string{"bob", "carol"} {
		mal.dial(waitStatus(t, o.meshctl, o.homes[n], o.ds[n]))
		links = append(links, mal.link)
	}
	start := time.Now()
	for i := range flood {
		sendAll(t, links, mal.chanMsg(ch, 20*time.Second, fmt.Sprintf("flood %05d", i)))
	}
	t.Logf("flood of %d messages sent in %v", flood, time.Since(start).Round(time.Millisecond))

	// carol: the whole flood arrives, and retention cuts the channel to
	// its count by taking mal's oldest.
	var fromCarol map[string]int
	waitFor(t, "carol to store the flood and prune the channel to its count", 90*time.Second, func() bool {
		c := counters(t, o.meshctl, o.homes["carol"])
		_, total := o.storedFrom("carol", "general")
		return c["rx.delivered.message"] >= flood+5 && total == keep
	})
	// Read again: the listing and the count are two reads, and a pass may
	// have ended between them.
	fromCarol, _ = o.storedFrom("carol", "general")
	if fromCarol["alice"] != 5 || fromCarol["mal"] != keep-5 {
		for _, l := range strings.Split(o.ds["carol"].stderr.String(), "\n") {
			if strings.Contains(l, "retention") || strings.Contains(l, "subscri") {
				t.Log(l)
			}
		}
		t.Fatalf("carol's store after retention: %v, want alice's 5 and mal's newest %d", fromCarol, keep-5)
	}
	// bob: everything is unread, so nothing goes by count.
	waitFor(t, "bob to store the flood", 90*time.Second, func() bool {
		return counters(t, o.meshctl, o.homes["bob"])["rx.delivered.message"] >= flood+5
	})
	runs := counters(t, o.meshctl, o.homes["bob"])["retention.runs"]
	waitFor(t, "a retention pass on bob after the flood", 30*time.Second, func() bool {
		return counters(t, o.meshctl, o.homes["bob"])["retention.runs"] > runs
	})
	unread := o.unreadFrom("bob")
	if unread["alice"] != 5 || unread["mal"] != flood {
		t.Fatalf("bob's unread items after retention: %v, want alice's 5 and mal's %d", unread, flood)
	}
	if _, total := o.storedFrom("bob", "general"); total != flood+5 {
		t.Fatalf("bob stores %d messages of #general, want all %d: unread items are not evicted by count", total, flood+5)
	}
}

// TestChannelQuotaRefusesFlood: bob takes at most a burst of 100 channel
// messages from one member, then 60 a minute. mal floods 600; bob stores
// about 100, refuses the rest as drop.quota, logs it at most once per
// 10 s, names mal in `meshctl status`, and alice's messages still arrive.
func TestChannelQuotaRefusesFlood(t *testing.T) {
	const flood = 600
	mal := newRawMember(t)
	o := newHistOrgWith(t, map[string]proto.PubKey{"mal": mal.pub}, "alice", "bob")
	o.ctl("alice", "channel", "create", "general")
	o.waitChannel("bob", "general")
	o.ctl("bob", "subscribe", "general")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.args["bob"] = append(o.args["bob"], "--channel-sender-burst", "100", "--channel-sender-rate", "60")
	o.start("bob")
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 15*time.Second)
	ch := o.channelID("alice", "general")
	mal.dial(waitStatus(t, o.meshctl, o.homes["bob"], o.ds["bob"]))
	start := time.Now()
	for i := range flood {
		sendAll(t, []*transport.Link{mal.link}, mal.chanMsg(ch, 0, fmt.Sprintf("flood %d", i)))
	}
	var c map[string]uint64
	waitFor(t, "every flood message stored or refused", 30*time.Second, func() bool {
		c = counters(t, o.meshctl, o.homes["bob"])
		return c["rx.delivered.message"]+c["drop.quota"] >= flood
	})
	took := time.Since(start)
	stored := c["rx.delivered.message"]
	// 100 at once, and one a second after that.
	if stored < 100 || stored > 100+uint64(took.Seconds())+2 {
		t.Fatalf("bob stored %d of mal's %d messages in %v, want the burst of 100 and one a second", stored, flood, took)
	}
	t.Logf("flood of %d: %d stored, drop.quota %d, in %v", flood, stored, c["drop.quota"], took.Round(time.Millisecond))
	for i := range 3 {
		o.ctl("alice", "send", "#general", fmt.Sprintf("alice during the flood %d", i))
	}
	waitFor(t, "alice's messages in bob's inbox", 15*time.Second, func() bool { return o.unreadFrom("bob")["alice"] == 3 })
	st := o.ctl("bob", "status")
	if !strings.Contains(st, "channel messages refused from mal") || !strings.Contains(st, "drop.quota") {
		t.Fatalf("meshctl status does not show the refusals:\n%s", st)
	}
	var js api.Status
	meshctlJSON(t, o.meshctl, &js, "--home", o.homes["bob"], "status", "--json")
	if len(js.QuotaRefused) != 1 || js.QuotaRefused[0].Name != "mal" || js.QuotaRefused[0].Refused != c["drop.quota"] {
		t.Fatalf("status --json quota_refused = %+v, want mal with %d", js.QuotaRefused, c["drop.quota"])
	}
	logs := o.ds["bob"].stderr.String()
	if n := strings.Count(logs, "channel message refused: its sender passed its channel quota"); n < 1 || n > 1+int(took/(10*time.Second))+1 {
		t.Fatalf("refusal logged %d times in %v, want at most once per 10 s", n, took)
	}
}
