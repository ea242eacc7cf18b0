package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

type doctorJSON struct {
	Problems int
	Checks   []struct{ Name, Status, Detail, Fix string }
}

func (d doctorJSON) check(t *testing.T, name string) (status, detail, fix string) {
	t.Helper()
	for _, c := range d.Checks {
		if c.Name == name {
			return c.Status, c.Detail, c.Fix
		}
	}
	t.Fatalf("doctor has no %s check: %+v", name, d)
	return
}

// doctor runs meshctl doctor --json and returns its answer and exit code.
func doctor(t *testing.T, meshctl, h string) (doctorJSON, int) {
	t.Helper()
	r := meshctlRun(t, meshctl, "--home", h, "doctor", "--json")
	var d doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v: %+v", err, r)
	}
	return d, r.code
}

// waitDoctor waits until check name has status want.
func waitDoctor(t *testing.T, meshctl, h, name, want string) doctorJSON {
	t.Helper()
	var d doctorJSON
	if !testwait.Until(15*time.Second, func() bool {
		d, _ = doctor(t, meshctl, h)
		st, _, _ := d.check(t, name)
		return st == want
	}) {
		t.Fatalf("doctor %s never became %s: %+v", name, want, d)
	}
	return d
}

// TestDoctorHealthyAndSeeds: a one-node org is healthy (exit 0); a node
// whose only seed does not answer has a problem, named with the seed's
// address and a fix (exit 1); an unwritable mailbox is a problem.
func TestDoctorHealthyAndSeeds(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	solo := filepath.Join(tmp, "solo")
	ds := startDaemon(t, meshd, solo, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "solo")
	waitStatus(t, meshctl, solo, ds)
	d, code := doctor(t, meshctl, solo)
	if code != 0 || d.Problems != 0 {
		t.Fatalf("healthy one-node org: exit %d: %+v", code, d)
	}
	if st, _, _ := d.check(t, "discovery"); st != "warn" {
		t.Fatalf("mDNS off without seeds: discovery %s", st)
	}
	txt := meshctlOK(t, meshctl, "--home", solo, "doctor")
	if !strings.Contains(txt, "no problem found") || !strings.Contains(txt, "--seed") {
		t.Fatalf("doctor text:\n%s", txt)
	}

	// A seed nobody listens on.
	dead := deadTCPAddr(t)
	lone := filepath.Join(tmp, "lone")
	dl := startDaemon(t, meshd, lone, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--seed", dead)
	waitStatus(t, meshctl, lone, dl)
	// Started without --name, the node is named after its host.
	var st struct{ Name string }
	meshctlJSON(t, meshctl, &st, "--home", lone, "status")
	if host, err := os.Hostname(); err == nil && st.Name != strings.Split(host, ".")[0] {
		t.Fatalf("default name %q, want the host name %q", st.Name, host)
	}
	d = waitDoctor(t, meshctl, lone, "seeds", "problem")
	if _, detail, fix := d.check(t, "seeds"); !strings.Contains(detail, dead) || fix == "" {
		t.Fatalf("seeds check: %q / %q", detail, fix)
	}
	r := meshctlRun(t, meshctl, "--home", lone, "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "PROBLEM") || !strings.Contains(r.stdout, "fix:") {
		t.Fatalf("doctor with a dead seed: %+v", r)
	}

	// A mailbox that cannot take files: its directory replaced by a file
	// (which stops root too, unlike a mode).
	mb := filepath.Join(solo, "mailbox")
	if err := os.Rename(mb, mb+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mb, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, code = doctor(t, meshctl, solo)
	if st, _, fix := d.check(t, "mailbox"); st != "problem" || code != 1 || !strings.Contains(fix, "writable") {
		t.Fatalf("unwritable mailbox: exit %d, %+v", code, d)
	}
}

// deadTCPAddr returns a loopback address nobody listens on.
func deadTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return "tcp://" + a
}

// TestDoctorNotMemberAndClock: a node outside its roster is told so with
// the command that fixes it; a member whose presence comes from 20 s in
// the future is reported as clock skew by doctor, status and the log.
func TestDoctorNotMemberAndClock(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	bob := filepath.Join(tmp, "bob")
	var bobID struct{ Key string }
	meshctlJSON(t, meshctl, &bobID, "--home", bob, "init", "--name", "bob")
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", bobID.Key, "--role", "member", "--name", "bob")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	sa := waitStatus(t, meshctl, a, da)

	// carol is not in the roster she starts with.
	c := filepath.Join(tmp, "carol")
	meshctlOK(t, meshctl, "--home", c, "init", "--name", "carol")
	dc := startDaemon(t, meshd, c, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix",
		"--roster", filepath.Join(a, "roster.cbor"), "--seed", tcpListen(t, sa))
	sc := waitStatus(t, meshctl, c, dc)
	d, code := doctor(t, meshctl, c)
	st, _, fix := d.check(t, "membership")
	if st != "problem" || code != 1 || !strings.Contains(fix, "roster add "+sc.Fingerprint) {
		t.Fatalf("doctor of a non-member: exit %d: %+v", code, d)
	}
	if st, _, _ := d.check(t, "links"); st != "problem" {
		t.Fatalf("non-member links check: %s", st)
	}
	dc.stop(syscall.SIGTERM)

	// bob, driven from here with his own key, announces presence with a
	// clock 20 s ahead (under the 30 s past which envelopes are dropped).
	bobID2, err := home.Home{Dir: bob}.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := transport.ParseAddr(tcpListen(t, sa))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	aliceKey, err := proto.ParsePubKey(sa.Key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := transport.Dial(ctx, addr, transport.Config{Identity: bobID2.Key, Org: "acme",
		Payload: func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: 2, Name: "bob"} }}, &aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	l.Start(func([]byte) {})
	defer l.Close()
	e := &proto.Envelope{ID: proto.NewID(), From: bobID2.Pub, To: proto.ToOrg("acme"), Kind: proto.KindPresence,
		TS: time.Now().Add(20 * time.Second).UnixMilli(), TTL: 300, Seq: 1, Epoch: uuid.New(),
		Presence: &proto.Presence{State: proto.Online, Seq: 1}}
	se, err := proto.SignEnvelope(bobID2.Key, e)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
		t.Fatal(err)
	}
	d = waitDoctor(t, meshctl, a, "clock", "problem")
	if _, detail, _ := d.check(t, "clock"); !strings.Contains(detail, "bob") || !strings.Contains(detail, "+20s") {
		t.Fatalf("clock check: %q", detail)
	}
	var s struct {
		ClockSkew float64 `json:"clock_skew_seconds"`
	}
	meshctlJSON(t, meshctl, &s, "--home", a, "status")
	if s.ClockSkew < 19 || s.ClockSkew > 21 {
		t.Fatalf("status clock_skew_seconds = %v, want about 20", s.ClockSkew)
	}
	if txt := meshctlOK(t, meshctl, "--home", a, "status"); !strings.Contains(txt, "clock") {
		t.Fatalf("status text lacks the clock warning:\n%s", txt)
	}
	da.waitLog("clock skew with a peer", 5*time.Second)

	// A message from 45 s ahead is dropped as from the future, and the
	// doctor says why: the clock.
	m := &proto.Envelope{ID: proto.NewID(), From: bobID2.Pub, To: proto.ToPeer(aliceKey), Kind: proto.KindMessage,
		TS: time.Now().Add(45 * time.Second).UnixMilli(), TTL: 300, Seq: 2, Epoch: e.Epoch,
		Message: &proto.Message{Body: "from the future"}}
	sm, err := proto.SignEnvelope(bobID2.Key, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, sm.Raw...)); err != nil {
		t.Fatal(err)
	}
	waitCounter(t, meshctl, a, "drop.future", 1)
	d, _ = doctor(t, meshctl, a)
	if _, detail, _ := d.check(t, "clock"); !strings.Contains(detail, "+45s") {
		t.Fatalf("clock check after a message from the future: %q", detail)
	}
}
