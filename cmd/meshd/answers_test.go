package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// Answers that did not come from the one asked: a Response is matched by
// (responder, request id), and ids that senders chose are ambiguous until
// a sender is named. The hostile members are rawMembers (envid_test.go).

// answerTarget is a real meshd, alice (admin of org acme), whose roster
// also lists bob (a member that never runs) and the raw members.
type answerTarget struct {
	meshctl, home string
	d             *daemon
	key           proto.PubKey
}

func startAnswerTarget(t *testing.T, raws map[string]*rawMember, roles map[string]string) *answerTarget {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	a := &answerTarget{meshctl: meshctl, home: filepath.Join(t.TempDir(), "alice")}
	meshctlOK(t, meshctl, "--home", a.home, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a.home, "roster", "init", "--org", "acme")
	for name, m := range raws {
		meshctlOK(t, meshctl, "--home", a.home, "roster", "add", m.pub.String(), "--role", roles[name], "--name", name)
	}
	meshctlOK(t, meshctl, "--home", a.home, "roster", "add", newRawMember(t).pub.String(), "--role", "member", "--name", "bob")
	a.d = startDaemon(t, meshd, a.home, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	st := waitStatus(t, meshctl, a.home, a.d)
	for _, m := range raws {
		a.key = m.dial(st)
	}
	waitPeers(t, meshctl, a.home, len(raws), 15*time.Second)
	return a
}

// sign signs e from m to peer to, filling in from, to, ts, ttl, seq,
// epoch, and the id unless set.
func (m *rawMember) sign(to proto.PubKey, e *proto.Envelope) *proto.SignedEnvelope {
	m.t.Helper()
	if e.ID == uuid.Nil {
		e.ID = proto.NewID()
	}
	m.seq++
	e.From, e.To, e.TS, e.TTL, e.Seq, e.Epoch = m.pub, proto.ToPeer(to), time.Now().UnixMilli(), 300, m.seq, m.ep
	se, err := proto.SignEnvelope(m.key, e)
	if err != nil {
		m.t.Fatal(err)
	}
	return se
}

// responses counts the Responses to request id that the node sent m.
func (m *rawMember) responses(id uuid.UUID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, se := range m.got {
		if se.Response != nil && se.Response.RequestID == id {
			n++
		}
	}
	return n
}

func (a *answerTarget) inbox(t *testing.T, args ...string) api.Inbox {
	t.Helper()
	var in api.Inbox
	meshctlJSON(t, a.meshctl, &in, append([]string{"--home", a.home, "inbox"}, args...)...)
	return in
}

// TestUnsolicitedResponseDropped: alice asks bob (offline) and waits for
// the answer; mallory, another member who learned the request id,
// answers it. The answer is dropped (drop.unsolicited_response), never
// reaches the inbox, and request --wait does not end on it. Mallory's
// answer to a request alice did send her is delivered.
func TestUnsolicitedResponseDropped(t *testing.T) {
	testpar.Parallel(t)
	mallory := newRawMember(t)
	a := startAnswerTarget(t, map[string]*rawMember{"mallory": mallory}, map[string]string{"mallory": "member"})
	wait := exec.Command(a.meshctl, "--home", a.home, "request", "bob", "disk.usage", "--wait", "--timeout", "6s")
	wait.Env = cleanEnv()
	stdout, err := wait.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	first, err := out.ReadString('\n') // "sent request ID; waiting for the answer"
	f := strings.Fields(first)
	if err != nil || len(f) < 3 {
		t.Fatalf("request --wait printed %q (%v)", first, err)
	}
	reqID, err := uuid.Parse(strings.TrimSuffix(f[2], ";"))
	if err != nil {
		t.Fatalf("request --wait printed %q: %v", first, err)
	}

	if err := mallory.send(mallory.sign(a.key, &proto.Envelope{Kind: proto.KindResponse,
		Response: &proto.Response{RequestID: reqID, Status: proto.StatusCompleted}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drop.unsolicited_response", 15*time.Second, func() bool {
		return counters(t, a.meshctl, a.home)["drop.unsolicited_response"] == 1
	})
	rest, _ := io.ReadAll(out)
	err = wait.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("request --wait ended (%v) on an answer from someone not asked; want exit 3, no answer in time:\n%s%s", err, first, rest)
	}
	for _, x := range a.inbox(t, "--all").Items {
		if x.Kind == "response" {
			t.Fatalf("the unsolicited response reached the inbox: %+v", x)
		}
	}

	// A request alice did send to mallory is answered by mallory.
	var s api.Sent
	meshctlJSON(t, a.meshctl, &s, "--home", a.home, "request", "mallory", "ping")
	id, err := uuid.Parse(s.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if err := mallory.send(mallory.sign(a.key, &proto.Envelope{Kind: proto.KindResponse,
		Response: &proto.Response{RequestID: id, Status: proto.StatusCompleted}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the solicited response in the inbox", 15*time.Second, func() bool {
		for _, x := range a.inbox(t).Items {
			if x.Kind == "response" && x.RequestID == s.RequestID {
				return true
			}
		}
		return false
	})
	if n := counters(t, a.meshctl, a.home)["drop.unsolicited_response"]; n != 1 {
		t.Fatalf("drop.unsolicited_response = %d after a solicited answer, want 1", n)
	}
}

// TestReusedRequestIDAmbiguous: two operators send requests that share a
// request id, and DMs that share an envelope id. meshctl respond and
// meshctl read refuse the bare id, naming both senders; --to and --from
// pick one, and an outbox response goes where its To header says.
func TestReusedRequestIDAmbiguous(t *testing.T) {
	testpar.Parallel(t)
	mallory, trent := newRawMember(t), newRawMember(t)
	a := startAnswerTarget(t, map[string]*rawMember{"mallory": mallory, "trent": trent},
		map[string]string{"mallory": "operator", "trent": "operator"})
	rid, dmID := proto.NewID(), proto.NewID()
	for _, x := range []struct {
		m    *rawMember
		body string
	}{{trent, "from trent"}, {mallory, "from mallory"}} {
		for _, se := range []*proto.SignedEnvelope{
			x.m.sign(a.key, &proto.Envelope{Kind: proto.KindRequest, Request: &proto.Request{RequestID: rid, Intent: "deploy"}}),
			x.m.sign(a.key, &proto.Envelope{ID: dmID, Kind: proto.KindMessage, Message: &proto.Message{Body: x.body}}),
		} {
			if err := x.m.send(se); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "four inbox items", 15*time.Second, func() bool { return len(a.inbox(t).Items) == 4 })

	res := meshctlRun(t, a.meshctl, "--home", a.home, "respond", rid.String(), "completed")
	if res.code == 0 || !strings.Contains(res.stderr, "ambiguous") || !strings.Contains(res.stderr, "mallory") || !strings.Contains(res.stderr, "trent") {
		t.Fatalf("respond to a reused request id: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	meshctlOK(t, a.meshctl, "--home", a.home, "respond", rid.String(), "completed", "--to", "trent")
	waitFor(t, "trent's answer", 15*time.Second, func() bool { return trent.responses(rid) == 1 })

	// The outbox honours To.
	outbox := filepath.Join(a.home, "mailbox", "outbox")
	file := "To: @mallory\nKind: response\nRequest-ID: " + rid.String() + "\nStatus: rejected\n---\n"
	if err := os.WriteFile(filepath.Join(outbox, ".draft"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(outbox, ".draft"), filepath.Join(outbox, "answer.txt")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "mallory's answer from the outbox", 15*time.Second, func() bool { return mallory.responses(rid) == 1 })
	if n := trent.responses(rid); n != 1 {
		t.Fatalf("trent got %d answers, want 1: the outbox answer went to him", n)
	}

	res = meshctlRun(t, a.meshctl, "--home", a.home, "read", dmID.String())
	if res.code == 0 || !strings.Contains(res.stderr, "ambiguous") || !strings.Contains(res.stderr, "mallory") || !strings.Contains(res.stderr, "trent") {
		t.Fatalf("read of a reused id: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	meshctlOK(t, a.meshctl, "--home", a.home, "read", dmID.String(), "--from", "mallory")
	unread := 0
	for _, x := range a.inbox(t).Items {
		if x.ID == dmID.String() {
			unread++
			if x.From.Name != "trent" {
				t.Fatalf("unread item %+v: mallory's should be the one read", x)
			}
		}
	}
	if unread != 1 {
		t.Fatalf("%d unread items with the reused id, want 1 (trent's)", unread)
	}
}
