package main

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
)

// TestRekeyGraceZeroRevokesAtOnce: with --grace 0 the member's link by
// its old key is closed as soon as the roster is applied, the old key is
// refused at the handshake and its envelopes are dropped, while the new
// key links and is shown under the member's name and role.
func TestRekeyGraceZeroRevokesAtOnce(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "raw", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	l := rt.dial(t, 5*time.Second)
	defer l.Close()
	l.Start(func([]byte) {})
	newPub, newKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	np := proto.PubKey(newPub)

	// Refusals: a bad key, an unknown member, a negative grace.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"raw", "ed25519:nope"}, "NEWKEY"},
		{[]string{"nobody", np.String()}, "not a member"},
		{[]string{"raw", np.String(), "--grace", "-1h"}, "--grace"},
		{[]string{"raw", rt.target.String()}, "already a member"},
	} {
		r := meshctlRun(t, rt.meshctl, append([]string{"--home", rt.home, "roster", "rekey"}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.msg) {
			t.Fatalf("roster rekey %v: exit %d, %s; want an error naming %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}

	var ed rekeyEditOut
	meshctlJSON(t, rt.meshctl, &ed, "--home", rt.home, "roster", "rekey", "raw", np.String(), "--grace", "0")
	if !ed.Rekey.Revoked || ed.Rekey.OldValidUntil != "" {
		t.Fatalf("roster rekey --grace 0: %+v", ed)
	}
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "publish")
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old key's link stayed up after a rekey with no grace")
	}
	if err := dialErr(rt, 5*time.Second); err == nil {
		t.Fatal("the old key linked after a rekey with no grace")
	}

	// The new key links; what it signs is the member's, what the old key
	// signs is dropped.
	rt.status = waitStatus(t, rt.meshctl, rt.home, rt.d)
	nt := &rawTarget{key: newKey, pub: np, target: rt.target, status: rt.status}
	nl := nt.dial(t, 5*time.Second)
	defer nl.Close()
	nl.Start(func([]byte) {})
	send := func(key ed25519.PrivateKey, body string) {
		t.Helper()
		se, err := proto.SignEnvelope(key, &proto.Envelope{ID: proto.NewID(), From: proto.PubKeyOf(key), To: proto.ToPeer(rt.target),
			Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
			Message: &proto.Message{Body: body}})
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			t.Fatal(err)
		}
	}
	notMember0 := counters(t, rt.meshctl, rt.home)["drop.not_member"]
	send(rt.key, "old key")
	waitFor(t, "drop.not_member", 10*time.Second, func() bool {
		return counters(t, rt.meshctl, rt.home)["drop.not_member"] == notMember0+1
	})
	send(newKey, "new key")
	var in inboxJSON
	waitFor(t, "the new key's DM", 10*time.Second, func() bool {
		meshctlJSON(t, rt.meshctl, &in, "--home", rt.home, "inbox", "--all")
		for _, it := range in.Items {
			if it.Body == "new key" {
				return it.From.Name == "raw"
			}
		}
		return false
	})
	for _, it := range in.Items {
		if it.Body == "old key" {
			t.Fatalf("the revoked key's DM was delivered: %+v", it)
		}
	}
}

// TestMeshctlRekeyCancel: meshctl rekey --cancel removes a pending key
// the roster does not list, and refuses without one.
func TestMeshctlRekeyCancel(t *testing.T) {
	testpar.Parallel(t)
	_, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "n")
	meshctlOK(t, meshctl, "--home", h, "init", "--name", "n")
	if r := meshctlRun(t, meshctl, "--home", h, "rekey", "--cancel"); r.code == 0 || !strings.Contains(r.stderr, "no pending key") {
		t.Fatalf("cancel without a pending key: exit %d, %s", r.code, r.stderr)
	}
	out := meshctlOK(t, meshctl, "--home", h, "rekey")
	if !strings.Contains(out, "meshctl roster rekey n ed25519:") {
		t.Fatalf("meshctl rekey does not say what the admin runs:\n%s", out)
	}
	if fi, err := os.Stat(filepath.Join(h, "identity-next.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pending key file: %v, %v", fi, err)
	}
	meshctlOK(t, meshctl, "--home", h, "rekey", "--cancel")
	if _, err := os.Stat(filepath.Join(h, "identity-next.key")); !os.IsNotExist(err) {
		t.Fatalf("pending key still there after --cancel: %v", err)
	}
}

// TestAdminRotatesOwnKey: the only admin rotates its own key with a
// running meshd. meshd says to restart once it applies the roster that
// lists the new key (and meshctl rekey says so too, refusing --cancel);
// after the restart the node has the new key, still signs roster updates
// as the admin, and takes a DM a member addressed to its previous key.
func TestAdminRotatesOwnKey(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "raw", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshd, _ := buildBinaries(t)
	old := rt.target
	card := filepath.Join(t.TempDir(), "card.json")
	if err := os.WriteFile(card, []byte(`{"intents":[{"name":"run-tests","summary":"go test on a branch"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	meshctlOK(t, rt.meshctl, "--home", rt.home, "card", "set", "--file", card)
	var nk struct {
		Key string `json:"key"`
	}
	meshctlJSON(t, rt.meshctl, &nk, "--home", rt.home, "rekey")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "rekey", old.Fingerprint(), nk.Key, "--grace", "1h")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "publish")
	rt.d.waitLog("restart meshd to switch", 10*time.Second)
	var st struct {
		Listed bool `json:"listed"`
	}
	meshctlJSON(t, rt.meshctl, &st, "--home", rt.home, "rekey")
	if !st.Listed {
		t.Fatal("meshctl rekey does not see the roster listing the new key")
	}
	if r := meshctlRun(t, rt.meshctl, "--home", rt.home, "rekey", "--cancel"); r.code == 0 || !strings.Contains(r.stderr, "already lists") {
		t.Fatalf("rekey --cancel of a listed key: exit %d, %s", r.code, r.stderr)
	}

	if err := rt.d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rt.d = startDaemon(t, meshd, rt.home, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	rt.d.waitLog("switched to the new key", 10*time.Second)
	rt.status = waitStatus(t, rt.meshctl, rt.home, rt.d)
	if rt.status.Key != nk.Key || rt.status.Role != "admin" {
		t.Fatalf("after the restart: key %s role %s; want %s admin", rt.status.Key, rt.status.Role, nk.Key)
	}
	if fi, err := os.Stat(filepath.Join(rt.home, "identity-prev.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("previous key file: %v, %v", fi, err)
	}
	// Its card moved with it.
	var c api.Card
	waitFor(t, "the card under the new key", 10*time.Second, func() bool {
		r := meshctlRun(t, rt.meshctl, "--home", rt.home, "card", "show", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &c) == nil && c.Key.String() == nk.Key
	})
	if len(c.Intents) != 1 || c.Intents[0].Name != "run-tests" {
		t.Fatalf("card under the new key: %+v", c)
	}
	// Still the admin: the next edit is signed by the new key.
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "role", "raw", "operator")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "publish")
	rt.status = waitStatus(t, rt.meshctl, rt.home, rt.d)
	if rt.target, _ = proto.ParsePubKey(rt.status.Key); rt.target.IsZero() {
		t.Fatal("no key in status")
	}

	// A member that still addresses the old key reaches the node.
	l := rt.dial(t, 5*time.Second)
	defer l.Close()
	l.Start(func([]byte) {})
	se, err := proto.SignEnvelope(rt.key, &proto.Envelope{ID: proto.NewID(), From: rt.pub, To: proto.ToPeer(old),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "to your old key"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DM to the old key", 10*time.Second, func() bool {
		var in inboxJSON
		meshctlJSON(t, rt.meshctl, &in, "--home", rt.home, "inbox", "--all")
		for _, it := range in.Items {
			if it.Body == "to your old key" {
				return true
			}
		}
		return false
	})
}

// TestRetiredKeyLinkClosed: a member still linked by its old key keeps
// its link, and its DMs are taken, through the grace window; when the
// window (and the clock allowance) ends, the node closes that link
// (link.retired_key) without waiting for any other event. After it, an
// envelope signed by the old key, carried by the member's new key, is
// dropped (drop.retired_key), and the old key cannot link.
func TestRetiredKeyLinkClosed(t *testing.T) {
	testpar.First(t)
	rt := startRawTarget(t, "", "raw", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	l := rt.dial(t, 5*time.Second)
	defer l.Close()
	l.Start(func([]byte) {})
	newPub, newKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The admin's edit, as meshctl roster rekey makes it, but with a
	// grace that ended 20 s ago: the window (and the 30 s clock allowance
	// after it) closes 10 s from now, not 31 s as with --grace 1s.
	until := time.Now().Add(-20 * time.Second).Truncate(time.Millisecond)
	rekeyWithGraceUntil(t, rt.home, rt.pub, proto.PubKey(newPub), until)
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "publish")
	rt.d.waitLog("member moved to a new key", 10*time.Second)

	se, err := proto.SignEnvelope(rt.key, &proto.Envelope{ID: proto.NewID(), From: rt.pub, To: proto.ToPeer(rt.target),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "inside the window"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old key's DM inside the window", 10*time.Second, func() bool {
		var in inboxJSON
		meshctlJSON(t, rt.meshctl, &in, "--home", rt.home, "inbox", "--all")
		for _, it := range in.Items {
			if it.Body == "inside the window" {
				return it.From.Name == "raw"
			}
		}
		return false
	})
	closed := until.Add(proto.MaxClockSkew)
	select {
	case <-l.Done():
		if time.Now().Before(closed) {
			t.Fatalf("the old key's link closed %v before its window ended", time.Until(closed))
		}
	case <-time.After(time.Until(closed) + 10*time.Second):
		t.Fatal("the old key's link stayed up after its window ended")
	}
	t.Logf("the old key's link closed %v after the window ended", time.Since(closed).Round(time.Millisecond))
	waitFor(t, "link.retired_key", 5*time.Second, func() bool {
		return counters(t, rt.meshctl, rt.home)["link.retired_key"] == 1
	})

	// The new key carries an envelope the old key signed after the
	// window: it is dropped as the retired key's, and not delivered.
	rt.status = waitStatus(t, rt.meshctl, rt.home, rt.d)
	nt := &rawTarget{key: newKey, pub: proto.PubKey(newPub), target: rt.target, status: rt.status}
	nl := nt.dial(t, 5*time.Second)
	defer nl.Close()
	nl.Start(func([]byte) {})
	retired0 := counters(t, rt.meshctl, rt.home)["drop.retired_key"]
	late, err := proto.SignEnvelope(rt.key, &proto.Envelope{ID: proto.NewID(), From: rt.pub, To: proto.ToPeer(rt.target),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 2, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "from the retired key"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.Send(append([]byte{byte(proto.FrameEnvelope)}, late.Raw...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drop.retired_key", 10*time.Second, func() bool {
		return counters(t, rt.meshctl, rt.home)["drop.retired_key"] == retired0+1
	})
	var in inboxJSON
	meshctlJSON(t, rt.meshctl, &in, "--home", rt.home, "inbox", "--all")
	for _, it := range in.Items {
		if it.Body == "from the retired key" {
			t.Fatalf("the retired key's envelope was delivered: %+v", it)
		}
	}
	if err := dialErr(rt, 5*time.Second); err == nil {
		t.Fatal("a link with the retired key was accepted")
	}
}

// TestResponseFromRotatedKey: a Request sent to a member's old key is
// answered by its new key after the rotation, and the answer is taken,
// not dropped as unsolicited.
func TestResponseFromRotatedKey(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "raw", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	var sent struct {
		RequestID string `json:"request_id"`
	}
	meshctlJSON(t, rt.meshctl, &sent, "--home", rt.home, "request", "raw", "run-tests")
	reqID, err := uuid.Parse(sent.RequestID)
	if err != nil {
		t.Fatalf("request id %q: %v", sent.RequestID, err)
	}
	newPub, newKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "rekey", "raw", proto.PubKey(newPub).String(), "--grace", "1h")
	meshctlOK(t, rt.meshctl, "--home", rt.home, "roster", "publish")
	rt.status = waitStatus(t, rt.meshctl, rt.home, rt.d)
	nt := &rawTarget{key: newKey, pub: proto.PubKey(newPub), target: rt.target, status: rt.status}
	l := nt.dial(t, 5*time.Second)
	defer l.Close()
	l.Start(func([]byte) {})
	se, err := proto.SignEnvelope(newKey, &proto.Envelope{ID: proto.NewID(), From: nt.pub, To: proto.ToPeer(rt.target),
		Kind: proto.KindResponse, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Response: &proto.Response{RequestID: reqID, Status: proto.StatusCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the response from the new key", 10*time.Second, func() bool {
		var in inboxJSON
		meshctlJSON(t, rt.meshctl, &in, "--home", rt.home, "inbox", "--all")
		for _, it := range in.Items {
			if it.Kind == "response" && it.RequestID == sent.RequestID {
				return it.From.Name == "raw"
			}
		}
		return false
	})
	if n := counters(t, rt.meshctl, rt.home)["drop.unsolicited_response"]; n != 0 {
		t.Fatalf("drop.unsolicited_response = %d", n)
	}
}

// rekeyWithGraceUntil edits the roster in the admin's home as meshctl
// roster rekey does, moving the member at old to next with old accepted
// until the time given, which may have passed.
func rekeyWithGraceUntil(t *testing.T, adminHome string, old, next proto.PubKey, until time.Time) {
	t.Helper()
	h := home.Home{Dir: adminHome}
	id, err := h.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := home.ReadRoster(h.RosterPath())
	if err != nil {
		t.Fatal(err)
	}
	r := cur.Next()
	if err := r.Rekey(old, next, until.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := r.Sign(id.Key); err != nil {
		t.Fatal(err)
	}
	if err := home.WriteRoster(h.RosterPath(), r); err != nil {
		t.Fatal(err)
	}
}
