package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// waitDoctorDetail waits until check name has status want and its detail
// holds every one of has.
func waitDoctorDetail(t *testing.T, meshctl, h, name, want string, has ...string) (detail, fix string) {
	t.Helper()
	var st string
	if !testwait.Until(30*time.Second, func() bool {
		d, _ := doctor(t, meshctl, h)
		st, detail, fix = d.check(t, name)
		ok := st == want
		for _, s := range has {
			ok = ok && strings.Contains(detail, s)
		}
		return ok
	}) {
		t.Fatalf("doctor %s never became %s with %q: %s: %q / %q", name, want, has, st, detail, fix)
	}
	return detail, fix
}

// TestDoctorSeedOfAnotherOrg: a node whose seed answers, but as a node of
// another org (each ran plain meshd once), is told so and how to join,
// not that the seed is unreachable behind a firewall.
func TestDoctorSeedOfAnotherOrg(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "a")
	seed := tcpListen(t, waitStatus(t, meshctl, a, da))
	db := startDaemon(t, meshd, b, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix", "--name", "b", "--seed", seed)
	waitStatus(t, meshctl, b, db)
	detail, fix := waitDoctorDetail(t, meshctl, b, "seeds", "problem", seed, "answers, but as a node of another org")
	if strings.Contains(detail+fix, "firewall") || !strings.Contains(fix, "meshctl join TOKEN") || !strings.Contains(fix, "meshctl invite") {
		t.Fatalf("seeds check of a seed of another org: %q / %q", detail, fix)
	}
}

// TestDoctorLinksRemovedAndClock: in an org of three, a member whose
// meshd stopped is named with the address that fails and why; a node an
// admin removed is told so by send (not that it may not write); and with
// no link left the clock check does not claim that clocks agree.
func TestDoctorLinksRemovedAndClock(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	homes, keys := map[string]string{}, map[string]string{}
	for _, n := range []string{"alice", "bob", "carol"} {
		homes[n] = filepath.Join(tmp, n)
		var id struct{ Key string }
		meshctlJSON(t, meshctl, &id, "--home", homes[n], "init", "--name", n)
		keys[n] = id.Key
	}
	a := homes["alice"]
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["bob"], "--role", "member", "--name", "bob")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["carol"], "--role", "member", "--name", "carol")
	pinned := filepath.Join(tmp, "roster.cbor")
	raw, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix")
	seed := tcpListen(t, waitStatus(t, meshctl, a, da))
	db := startDaemon(t, meshd, homes["bob"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix", "--roster", pinned, "--seed", seed)
	waitStatus(t, meshctl, homes["bob"], db)
	dc := startDaemon(t, meshd, homes["carol"], "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix", "--roster", pinned, "--seed", seed)
	carolAddr := tcpListen(t, waitStatus(t, meshctl, homes["carol"], dc))
	waitPeers(t, meshctl, a, 2, 10*time.Second)
	waitDoctor(t, meshctl, a, "links", "ok")

	// carol's meshd stops: alice names her address and why it fails.
	if err := dc.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDoctorDetail(t, meshctl, a, "links", "warn", "carol", carolAddr, "nothing listens there")

	// bob is removed: his send says so.
	meshctlOK(t, meshctl, "--home", a, "roster", "remove", "bob")
	meshctlOK(t, meshctl, "--home", a, "roster", "publish")
	testwait.For(t, 15*time.Second, "bob to learn that he was removed", func() bool {
		var s struct{ Removed bool }
		meshctlJSON(t, meshctl, &s, "--home", homes["bob"], "status")
		return s.Removed
	})
	for _, args := range [][]string{{"dm", "alice", "hello"}, {"send", "#general", "hello"}} {
		r := meshctlRun(t, meshctl, append([]string{"--home", homes["bob"]}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "this node was removed from the roster") || strings.Contains(r.stderr, "not a writer") {
			t.Fatalf("send %v from a removed node: %+v", args, r)
		}
	}

	var bs struct{ Counters map[string]uint64 }
	meshctlJSON(t, meshctl, &bs, "--home", homes["bob"], "status")
	if bs.Counters["tx.refused.not_member"] != 2 {
		t.Fatalf("tx.refused.not_member = %d, want 2", bs.Counters["tx.refused.not_member"])
	}

	// alice has no link left: the clocks are not said to agree.
	waitPeers(t, meshctl, a, 0, 15*time.Second)
	d, _ := doctor(t, meshctl, a)
	if st, detail, _ := d.check(t, "clock"); st != "ok" || strings.Contains(detail, "agree") || !strings.Contains(detail, "no linked peer") {
		t.Fatalf("clock check with no link: %s %q", st, detail)
	}
}

// TestDoctorOffline: with no meshd on the home, doctor says so and runs
// the checks that need none: home, identity, roster, the configuration
// (as meshd --print-config checks it) and the listen ports, naming a
// port another program holds and a value of the wrong type.
func TestDoctorOffline(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "node")

	d, code := doctor(t, meshctl, h)
	if st, detail, fix := d.check(t, "meshd"); code != 1 || st != "problem" || !strings.Contains(detail, "not running") || !strings.Contains(fix, "meshd --home "+h) {
		t.Fatalf("doctor without meshd nor home: exit %d: %+v", code, d)
	}
	if st, _, _ := d.check(t, "home"); st != "warn" {
		t.Fatalf("home check of a home not made yet: %+v", d)
	}

	// A home whose configured port another program holds.
	var id struct{ Fingerprint string }
	meshctlJSON(t, meshctl, &id, "--home", h, "init", "--name", "n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := "tcp://" + ln.Addr().String()
	if err := os.WriteFile(filepath.Join(h, "meshd.toml"), []byte("listen = [\""+held+"\"]\nno_mdns = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, code = doctor(t, meshctl, h)
	for name, want := range map[string]string{"home": "ok", "identity": "ok", "roster": "ok", "config": "ok", "ports": "problem"} {
		if st, _, _ := d.check(t, name); st != want {
			t.Fatalf("%s check: %s, want %s: %+v", name, st, want, d)
		}
	}
	if _, detail, fix := d.check(t, "ports"); code != 1 || !strings.Contains(detail, held+" is in use") || !strings.Contains(fix, "--listen") {
		t.Fatalf("ports check: exit %d: %q / %q", code, detail, fix)
	}
	if _, detail, _ := d.check(t, "identity"); !strings.Contains(detail, id.Fingerprint) {
		t.Fatalf("identity check: %q", detail)
	}
	txt := meshctlRun(t, meshctl, "--home", h, "doctor")
	if txt.code != 1 || !strings.Contains(txt.stdout, "meshd is not running") || !strings.Contains(txt.stdout, "PROBLEM  ports") {
		t.Fatalf("doctor text without meshd: %+v", txt)
	}

	// A home others may write to: meshd would refuse it.
	if err := os.Chmod(h, 0o770); err != nil {
		t.Fatal(err)
	}
	d, _ = doctor(t, meshctl, h)
	if st, detail, fix := d.check(t, "home"); st != "problem" || !strings.Contains(detail, "0770") || !strings.Contains(fix, "chmod 700") {
		t.Fatalf("home check of a group-writable home: %s %q %q", st, detail, fix)
	}
	if err := os.Chmod(h, 0o700); err != nil {
		t.Fatal(err)
	}

	// A value of the wrong type: named with its line.
	if err := os.WriteFile(filepath.Join(h, "meshd.toml"), []byte("no_mdns = true\npresence_ttl = 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _ = doctor(t, meshctl, h)
	if st, detail, _ := d.check(t, "config"); st != "problem" || !strings.Contains(detail, `line 2: presence_ttl is a number, want a duration in quotes, like: presence_ttl = "5m"`) {
		t.Fatalf("config check: %s %q", st, detail)
	}

	// With meshd running, the running node checks.
	if err := os.WriteFile(filepath.Join(h, "meshd.toml"), []byte("listen = [\"tcp://127.0.0.1:0\"]\nno_mdns = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dm := startDaemon(t, meshd, h)
	waitStatus(t, meshctl, h, dm)
	d, _ = doctor(t, meshctl, h)
	for _, c := range d.Checks {
		if c.Name == "meshd" || c.Name == "ports" {
			t.Fatalf("doctor with meshd running ran an offline check: %+v", d)
		}
	}
}
