//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
)

// TestDoctorWrongOrgThenJoin: on a LAN (network namespaces on a bridge,
// mDNS only), host 1 ran plain meshd once and holds a one-node org. Its
// doctor names the org mDNS sees next door and the fix, while host 0's
// (the admin's) advises inviting the stray node; after an invite
// from host 0 and meshctl join, a plain meshd on host 1 links.
func TestDoctorWrongOrgThenJoin(t *testing.T) {
	testpar.First(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	nw := netnstest.NewBridge(t, 2)
	tmp := t.TempDir()
	h0, h1 := filepath.Join(tmp, "host0"), filepath.Join(tmp, "host1")
	meshctlOK(t, meshctl, "--home", h0, "init", "--name", "host0")
	meshctlOK(t, meshctl, "--home", h0, "roster", "init", "--org", "lan")
	args := []string{"--listen", "tcp://0.0.0.0:7437", "--no-unix", "--mdns-interface", netnstest.HostIface}
	start := func(i int, h string) *daemon {
		cmd := nw.Host(i).Command(context.Background(), meshd, append([]string{"--home", h}, args...)...)
		d := startDaemonCmd(t, cmd, h)
		waitStatus(t, meshctl, h, d)
		return d
	}
	d0 := start(0, h0)
	d1 := start(1, h1)

	d := waitDoctor(t, meshctl, h1, "org", "problem")
	_, detail, fix := d.check(t, "org")
	if !strings.Contains(detail, `"lan"`) || !strings.Contains(fix, "meshctl join") {
		t.Fatalf("org check: %q / %q", detail, fix)
	}
	d1.waitLog("ignoring nodes of another org", 5*time.Second)
	// On host 0, the admin of "lan", the stray node is no reason to
	// leave: the advice is to invite it.
	d = waitDoctor(t, meshctl, h0, "org", "warn")
	if _, detail, fix := d.check(t, "org"); !strings.Contains(detail, "org-") || !strings.Contains(fix, "meshctl invite") ||
		strings.Contains(fix, "join TOKEN here") {
		t.Fatalf("org check on the admin: %q / %q", detail, fix)
	}
	d0.waitLog("meshctl invite --role member here, then meshctl join TOKEN on it", 5*time.Second)
	if err := d1.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", h0, "invite", "--role", "member")
	join := nw.Host(1).Command(context.Background(), meshctl, "--home", h1, "join", inv.Token, "--json")
	join.Env = cleanEnv()
	out, err := join.Output()
	if err != nil {
		t.Fatalf("join on host 1: %v\n%s", err, out)
	}
	var res struct{ Org, Left string }
	if err := json.Unmarshal(out, &res); err != nil || res.Org != "lan" || !strings.HasPrefix(res.Left, "org-") {
		t.Fatalf("join: %v %s", err, out)
	}
	start(1, h1)
	waitPeers(t, meshctl, h1, 1, 10*time.Second)
	if d, code := doctor(t, meshctl, h1); code != 0 || d.Problems != 0 {
		t.Fatalf("doctor after join: exit %d: %+v", code, d)
	}
}

// TestDoctorNoMulticast: on a host whose only interfaces carry no
// multicast (a namespace whose interface has multicast turned off, and
// loopback), mDNS cannot start; with no seeds either, doctor names the
// discovery problem and the fixes (--seed, or --mdns-interface lo with a
// route), and exits 1.
func TestDoctorNoMulticast(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	nw := netnstest.NewBridge(t, 1)
	off := nw.Host(0).Command(context.Background(), "ip", "link", "set", netnstest.HostIface, "multicast", "off")
	if out, err := off.CombinedOutput(); err != nil {
		t.Fatalf("ip link set multicast off: %v\n%s", err, out)
	}
	h := filepath.Join(t.TempDir(), "host0")
	cmd := nw.Host(0).Command(context.Background(), meshd, "--home", h, "--listen", "tcp://0.0.0.0:7437", "--no-unix")
	d := startDaemonCmd(t, cmd, h)
	waitStatus(t, meshctl, h, d)
	doc, code := doctor(t, meshctl, h)
	status, detail, fix := doc.check(t, "discovery")
	if code != 1 || status != "problem" {
		t.Fatalf("doctor without multicast: exit %d, discovery %s: %q", code, status, detail)
	}
	if !strings.Contains(detail, "no usable network interface") || !strings.Contains(fix, "--seed") || !strings.Contains(fix, "--mdns-interface lo") {
		t.Fatalf("discovery check: %q / fix %q", detail, fix)
	}
}

// TestDoctorNamesSilentAddress: on a LAN, a member whose packets are
// silently dropped (as by a firewall) is named by doctor with the
// address that fails and why: no answer in time.
func TestDoctorNamesSilentAddress(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	nw := netnstest.NewBridge(t, 2)
	tmp := t.TempDir()
	h0, h1 := filepath.Join(tmp, "host0"), filepath.Join(tmp, "host1")
	var id1 struct{ Key string }
	meshctlJSON(t, meshctl, &id1, "--home", h1, "init", "--name", "host1")
	meshctlOK(t, meshctl, "--home", h0, "init", "--name", "host0")
	meshctlOK(t, meshctl, "--home", h0, "roster", "init", "--org", "lan")
	meshctlOK(t, meshctl, "--home", h0, "roster", "add", id1.Key, "--role", "member", "--name", "host1")
	pinned := filepath.Join(tmp, "roster.cbor")
	raw, err := os.ReadFile(filepath.Join(h0, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--listen", "tcp://0.0.0.0:7437", "--no-unix", "--no-mdns", "--keepalive", "500ms", "--idle-timeout", "2s"}
	start := func(i int, h string, extra ...string) {
		cmd := nw.Host(i).Command(context.Background(), meshd, append(append([]string{"--home", h}, args...), extra...)...)
		waitStatus(t, meshctl, h, startDaemonCmd(t, cmd, h))
	}
	start(0, h0)
	start(1, h1, "--roster", pinned, "--seed", "tcp://"+nw.Host(0).IP.String()+":7437")
	waitPeers(t, meshctl, h0, 1, 10*time.Second)

	if err := nw.Partition(0, 1); err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + nw.Host(1).IP.String() + ":7437"
	detail, fix := waitDoctorDetail(t, meshctl, h0, "links", "problem", "host1", addr, "no answer in time")
	if !strings.Contains(fix, "firewall") {
		t.Fatalf("links check: %q / %q", detail, fix)
	}
}
