//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
)

// Delivery tests (PROTOCOL §16.1, §16.6): a DM, request or response that
// meshd accepted is delivered, or its sender is told it was not; an
// unacknowledged one never expires sooner than the store-and-forward
// window. They shorten the windows through configuration.

// deliveryOf returns node i's delivery record of id, through meshctl
// status ID --json.
func (m *faultMesh) deliveryOf(i int, id string) api.Delivery {
	m.t.Helper()
	var d api.Delivery
	meshctlJSON(m.t, m.meshctl, &d, "--home", m.homes[i], "status", id)
	return d
}

// recipientState is the state of a DM's one recipient.
func recipientState(d api.Delivery) string {
	if len(d.Recipients) != 1 {
		return ""
	}
	return d.Recipients[0].State
}

// waitState polls node i's record of id until its recipient's state is
// want (an ack follows the recipient's commit).
func (m *faultMesh) waitState(i int, id, want string, within time.Duration) api.Delivery {
	m.t.Helper()
	var d api.Delivery
	if !testwait.Until(within, func() bool { d = m.deliveryOf(i, id); return recipientState(d) == want }) {
		m.t.Fatalf("%s: %s is %q after %v, want %s", m.names[i], id, recipientState(d), within, want)
	}
	return d
}

// inboxItem polls node i's inbox (read items too) until one matches.
func (m *faultMesh) inboxItem(i int, within time.Duration, match func(api.Item) bool) api.Item {
	m.t.Helper()
	var found api.Item
	var err error
	if !testwait.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var in *api.Inbox
		if in, err = m.client(i).Inbox(ctx, api.InboxQuery{All: true}); err != nil {
			return false
		}
		for _, it := range in.Items {
			if match(it) {
				found = it
				return true
			}
		}
		return false
	}) {
		m.t.Fatalf("%s: no matching inbox item within %v (last error %v)", m.names[i], within, err)
	}
	return found
}

// TestDeliveryOutlivesTTLThroughCrash: a channel message counts bob as a
// reader that acknowledged it. Then alice DMs bob while bob hangs
// (SIGSTOP: alice's link still looks up, so the old rule signed the DM
// with ttl_secs, 2 s here); bob is then killed and stays down for longer
// than that life. The DM must still be queued, reach bob when he starts
// again, and show as delivered in alice's meshctl status ID.
func TestDeliveryOutlivesTTLThroughCrash(t *testing.T) {
	testpar.Parallel(t)
	const ttl = 2 * time.Second
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--envelope-ttl", "2s", "--retention-interval", "1s")
	// A channel message counts the linked readers that stored it.
	m.channel("ch")
	var cs api.Sent
	meshctlJSON(t, m.meshctl, &cs, "--home", m.homes[0], "send", "#ch", "counted")
	var cd api.Delivery
	if !testwait.Until(15*time.Second, func() bool {
		cd = m.deliveryOf(0, cs.ID)
		if cd.LinkedReaders == nil || cd.AckedReaders == nil || *cd.LinkedReaders != 1 {
			t.Fatalf("channel message record %+v: want 1 linked reader", cd)
		}
		return *cd.AckedReaders == 1
	}) {
		t.Fatalf("bob never acknowledged the channel message: %+v", cd)
	}
	if out := m.ctl(0, "status", cs.ID); !strings.Contains(out, "1 linked when sent, 1 acknowledged") {
		t.Fatalf("meshctl status of a channel message:\n%s", out)
	}

	bob := m.ds[1]
	if err := syscall.Kill(bob.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "sent while bob hangs")
	signed := time.Now()
	if len(sent.SentTo) != 1 || sent.Queued {
		t.Fatalf("the DM went to %v (queued %v): alice should still see bob linked", sent.SentTo, sent.Queued)
	}
	if err := bob.stop(syscall.SIGKILL); err != nil && !strings.Contains(err.Error(), "killed") {
		t.Logf("bob: %v", err)
	}
	// Bob stays down past the envelope TTL and two retention passes.
	for time.Since(signed) < ttl+3*time.Second {
		if st := recipientState(m.deliveryOf(0, sent.ID)); st != "queued" {
			t.Fatalf("%v after signing, with bob down: state %q, want queued", time.Since(signed).Round(time.Millisecond), st)
		}
		time.Sleep(200 * time.Millisecond) // deliberate: the state must hold through the whole outage
	}
	if d := m.deliveryOf(0, sent.ID); recipientState(d) != "queued" || !d.Expires.After(signed.Add(time.Hour)) {
		t.Fatalf("after bob was down for %v: %+v, want queued with the 24 h window", time.Since(signed).Round(time.Second), d)
	}
	m.start(1)
	m.inboxItem(1, 60*time.Second, func(it api.Item) bool { return it.ID == sent.ID })
	d := m.waitState(0, sent.ID, "delivered", 15*time.Second)
	if d.Recipients[0].At.Before(signed) {
		t.Fatalf("alice's record after bob stored it: %+v, want delivered with the ack's time", d)
	}
	out := m.ctl(0, "sent")
	if !strings.Contains(out, sent.ID) || !strings.Contains(out, "delivered") {
		t.Fatalf("meshctl sent does not list the DM as delivered:\n%s", out)
	}
}

// TestDeliverySilentOutage: host1's link is silently blocked (a netns
// partition) just before host0 DMs it, so the DM is signed while the link
// looks up. The block outlives the envelope TTL (3 s): after the heal the
// DM is delivered. Then, with a 6 s delivery window, a DM and a request
// sent into a block that outlives the window are reported: a
// delivery_failed item wakes meshctl wait and ends request --wait,
// meshctl status ID says expired, the mailbox file says delivery_failed. Nothing is lost
// silently.
func TestDeliverySilentOutage(t *testing.T) {
	testpar.First(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	nw := netnstest.NewBridge(t, 2)
	homes, keys, pinned := multiHostOrg(t, meshctl, 2)
	m := &faultMesh{t: t, meshctl: meshctl, homes: homes, keys: keys, names: []string{"host0", "host1"}}
	window := "60s"
	m.cmd = func(i int) *exec.Cmd {
		args := []string{"--home", homes[i], "--roster", pinned, "--listen", "tcp://0.0.0.0:7437", "--no-unix", "--no-mdns",
			"--seed", "tcp://" + nw.Host(1-i).IP.String() + ":7437",
			"--envelope-ttl", "3s", "--delivery-window", window, "--retention-interval", "1s",
			"--keepalive", "500ms", "--idle-timeout", "2s"}
		return nw.Host(i).Command(context.Background(), meshd, args...)
	}
	m.startAll(15 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// 1. A block that outlives the envelope TTL but not the window.
	if err := nw.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	dm1, err := m.client(0).Send(ctx, api.Send{To: "host1", Body: "signed while the link looked up"})
	if err != nil {
		t.Fatal(err)
	}
	signed := time.Now()
	if len(dm1.SentTo) != 1 {
		t.Fatalf("DM 1 went to %v: the link should still look up", dm1.SentTo)
	}
	testwait.For(t, 20*time.Second, "host0 to notice the outage", func() bool { return m.status(0).Links == 0 })
	time.Sleep(time.Until(signed.Add(3*time.Second + 3*time.Second))) // deliberate: the outage outlasts the TTL and two retention passes
	if st := recipientState(m.deliveryOf(0, dm1.ID)); st != "queued" {
		t.Fatalf("DM 1 after %v of outage: %q, want queued", time.Since(signed).Round(time.Second), st)
	}
	if err := nw.Heal(0, 1); err != nil {
		t.Fatal(err)
	}
	m.inboxItem(1, 45*time.Second, func(it api.Item) bool { return it.ID == dm1.ID })
	m.waitState(0, dm1.ID, "delivered", 15*time.Second)
	t.Logf("DM 1 delivered %v after it was signed, through a %v block", time.Since(signed).Round(time.Second), 6*time.Second)

	// 2. A block that outlives the window (6 s).
	window = "6s"
	if err := m.ds[0].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	m.start(0)
	waitPeers(t, meshctl, homes[0], 1, 60*time.Second)
	if err := nw.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	waitCmd := exec.CommandContext(ctx, meshctl, "--home", homes[0], "wait", "--timeout", "60s", "--json")
	waitCmd.Env = cleanEnv()
	var waitOut strings.Builder
	waitCmd.Stdout = &waitOut
	if err := waitCmd.Start(); err != nil {
		t.Fatal(err)
	}
	dm2, err := m.client(0).Send(ctx, api.Send{To: "host1", Body: "lost to a long outage"})
	if err != nil {
		t.Fatal(err)
	}
	// request --wait ends with the request's own failure, not at its
	// timeout.
	reqCmd := exec.CommandContext(ctx, meshctl, "--home", homes[0], "request", "host1", "run-tests", "--wait", "--timeout", "90s", "--json")
	reqCmd.Env = cleanEnv()
	reqOut, reqErr := reqCmd.Output()
	var req api.Item
	if jerr := json.Unmarshal(reqOut, &req); jerr != nil || req.Kind != api.KindDeliveryFailed || req.FailedKind != "request" {
		t.Fatalf("request --wait: %v, printed %s; want the request's delivery_failed item", reqErr, reqOut)
	}
	var ee *exec.ExitError
	if !errors.As(reqErr, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("request --wait on an undelivered request: %v, want exit 1", reqErr)
	}
	// Our own failed request in the inbox is not a request to answer.
	if r := meshctlRun(t, meshctl, "--home", homes[0], "respond", req.RequestID, "completed"); r.code == 0 || !strings.Contains(r.stderr, "no received request") {
		t.Fatalf("respond to our own failed request: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := waitCmd.Wait(); err != nil {
		t.Fatalf("meshctl wait: %v\n%s", err, waitOut.String())
	}
	if !strings.Contains(waitOut.String(), api.KindDeliveryFailed) {
		t.Fatalf("meshctl wait woke without a delivery_failed item:\n%s", waitOut.String())
	}
	for _, id := range []string{dm2.ID, req.ID} {
		it := m.inboxItem(0, 30*time.Second, func(it api.Item) bool { return it.ID == id && it.Kind == api.KindDeliveryFailed })
		if it.Delivery != "expired" || it.To != "@host1" || !it.Wakes {
			t.Errorf("delivery_failed item %+v: want expired, to @host1, waking", it)
		}
		if d := m.deliveryOf(0, id); recipientState(d) != "expired" {
			t.Errorf("meshctl status %s: %+v, want expired", id, d)
		}
		if out := m.ctl(0, "status", id); !strings.Contains(out, "expired at") {
			t.Errorf("meshctl status %s does not say expired:\n%s", id, out)
		}
	}
	if out := m.ctl(0, "inbox", "--all"); !strings.Contains(out, "delivery failed: your request to @host1 was expired") {
		t.Errorf("meshctl inbox does not show the failed request:\n%s", out)
	}
	var pending api.SentList
	meshctlJSON(t, meshctl, &pending, "--home", homes[0], "sent", "--pending")
	if len(pending.Items) != 0 {
		t.Errorf("meshctl sent --pending lists %d, want none: everything expired", len(pending.Items))
	}
	if f := mailboxFileWith(t, homes[0], "Message-ID: "+dm2.ID); !strings.Contains(f, "\nKind: delivery_failed\n") ||
		!strings.Contains(f, "\nDelivery: expired\n") || !strings.Contains(f, "\nFailed-Kind: message\n") {
		t.Errorf("the mailbox file of DM 2 does not say it failed:\n%s", f)
	}
	// The file still verifies: the Delivery headers are local, unsigned.
	path := filepath.Join(t.TempDir(), "failed.txt")
	if err := os.WriteFile(path, []byte(mailboxFileWith(t, homes[0], "Message-ID: "+dm2.ID)), 0o600); err != nil {
		t.Fatal(err)
	}
	m.ctl(0, "verify", path)
	if err := nw.Heal(0, 1); err != nil {
		t.Fatal(err)
	}
	if v := m.status(0).Counters["tx.failed.expired"]; v != 2 {
		t.Errorf("tx.failed.expired = %v, want 2", v)
	}
}

// mailboxFileWith returns the first mailbox file under home that holds
// text, waiting a little for the mirror.
func mailboxFileWith(t *testing.T, home, text string) string {
	t.Helper()
	var found string
	if !testwait.Until(10*time.Second, func() bool {
		_ = filepath.WalkDir(filepath.Join(home, "mailbox"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || found != "" || !strings.HasSuffix(p, ".txt") {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), text) {
				found = string(b)
			}
			return nil
		})
		return found != ""
	}) {
		t.Fatalf("no mailbox file under %s holds %q", home, text)
	}
	return found
}
