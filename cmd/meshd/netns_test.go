//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// multiHostOrg creates n homes and a roster listing all of them; it
// returns the homes, the keys and the pinned roster file.
func multiHostOrg(t *testing.T, meshctl string, n int) (homes, keys []string, pinned string) {
	t.Helper()
	tmp := t.TempDir()
	for i := 0; i < n; i++ {
		h := filepath.Join(tmp, "host"+string(rune('0'+i)))
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", h, "init", "--name", "host"+string(rune('0'+i)))
		homes = append(homes, h)
		keys = append(keys, id.Key)
	}
	meshctlOK(t, meshctl, "--home", homes[0], "roster", "init", "--org", "lan")
	for i := 1; i < n; i++ {
		meshctlOK(t, meshctl, "--home", homes[0], "roster", "add", keys[i], "--role", "member", "--name", "host"+string(rune('0'+i)))
	}
	pinned = filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(homes[0], "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return homes, keys, pinned
}

// TestMultiHostMDNS runs the real meshd on 3 hosts (network namespaces on
// a bridge) with mDNS only, no seeds: every node must see the other two in
// meshctl peers within 10 s, over TCP across the bridge.
func TestMultiHostMDNS(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	const n = 3
	nw := netnstest.NewBridge(t, n)
	homes, keys, pinned := multiHostOrg(t, meshctl, n)

	var ds []*daemon
	for i := 0; i < n; i++ {
		h := nw.Host(i)
		cmd := h.Command(context.Background(), meshd, "--home", homes[i], "--roster", pinned,
			"--listen", "tcp://0.0.0.0:7437", "--no-unix", "--mdns-interface", netnstest.HostIface, "--log-level", "debug")
		ds = append(ds, startDaemonCmd(t, cmd, homes[i]))
	}
	for i := range ds {
		waitStatus(t, meshctl, homes[i], ds[i])
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		got := waitPeers(t, meshctl, homes[i], n-1, 10*time.Second-time.Since(start))
		for j := 0; j < n; j++ {
			if j == i {
				continue
			}
			if net, ok := got[keys[j]]; !ok || net != "tcp" {
				t.Fatalf("host %d: peer %d missing or not over tcp: %v", i, j, got)
			}
		}
	}
	t.Logf("all %d hosts linked %v after start", n, time.Since(start).Round(time.Millisecond))
	// Links cross the bridge: peer addresses are the hosts' bridge IPs.
	var p peersJSON
	meshctlJSON(t, meshctl, &p, "--home", homes[0], "peers")
	for _, x := range p.Peers {
		if !strings.HasPrefix(x.Address, nw.Subnet().IP.String()[:len(nw.Subnet().IP.String())-1]) {
			t.Fatalf("peer address %s is not on the bridge subnet %s", x.Address, nw.Subnet())
		}
	}
	for _, d := range ds {
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

// TestMultiHostSeedsOnly runs 3 hosts with --no-mdns: hosts 1 and 2 know
// only host 0 as a seed, and peer exchange links them to each other.
func TestMultiHostSeedsOnly(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	const n = 3
	nw := netnstest.NewBridge(t, n)
	homes, keys, pinned := multiHostOrg(t, meshctl, n)
	ds := startSeededHosts(t, nw, meshd, meshctl, homes, pinned)
	for i := 0; i < n; i++ {
		got := waitPeers(t, meshctl, homes[i], n-1, 10*time.Second)
		for j := 0; j < n; j++ {
			if _, ok := got[keys[j]]; j != i && !ok {
				t.Fatalf("host %d lacks peer %d: %v", i, j, got)
			}
		}
	}
	var s statusJSON
	meshctlJSON(t, meshctl, &s, "--home", homes[1], "status")
	for _, d := range ds {
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

// TestMultiHostMDNSEight: 8 hosts with mDNS only form a full mesh within 15 s.
func TestMultiHostMDNSEight(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("8 real daemons; skipped with -short")
	}
	meshd, meshctl := buildBinaries(t)
	const n = 8
	nw := netnstest.NewBridge(t, n)
	homes, _, pinned := multiHostOrg(t, meshctl, n)
	var ds []*daemon
	for i := 0; i < n; i++ {
		cmd := nw.Host(i).Command(context.Background(), meshd, "--home", homes[i], "--roster", pinned,
			"--listen", "tcp://0.0.0.0:7437", "--no-unix", "--mdns-interface", netnstest.HostIface)
		ds = append(ds, startDaemonCmd(t, cmd, homes[i]))
	}
	for i := range ds {
		waitStatus(t, meshctl, homes[i], ds[i])
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		waitPeers(t, meshctl, homes[i], n-1, 15*time.Second-time.Since(start))
	}
	t.Logf("%d hosts in a full mesh %v after all started", n, time.Since(start).Round(time.Millisecond))
}

// TestMultiHostRevocation: 5 hosts; the admin removes host 4 and the new
// roster is published from host 2 (not the admin's node). Within 5 s every
// node has dropped its link to host 4 and host 4 cannot get back in.
func TestMultiHostRevocation(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	const n = 5
	nw := netnstest.NewBridge(t, n)
	homes, keys, pinned := multiHostOrg(t, meshctl, n)
	startSeededHosts(t, nw, meshd, meshctl, homes, pinned)
	for i := 0; i < n; i++ {
		waitPeers(t, meshctl, homes[i], n-1, 10*time.Second)
	}
	// The admin (host 0) edits offline on a copy of its roster, then the
	// file is handed to host 2, which publishes it.
	edited := filepath.Join(t.TempDir(), "roster-v-next.cbor")
	b, _ := os.ReadFile(filepath.Join(homes[0], "roster.cbor"))
	os.WriteFile(edited, b, 0o600)
	meshctlOK(t, meshctl, "--home", homes[0], "roster", "remove", keys[4], "--file", edited)
	start := time.Now()
	meshctlOK(t, meshctl, "--home", homes[2], "roster", "publish", edited)
	for i := 0; i < n-1; i++ {
		if !testwait.Until(time.Until(start.Add(5*time.Second)), func() bool {
			_, has := peerKeys(t, meshctl, homes[i])[keys[4]]
			return !has
		}) {
			t.Fatalf("host %d still linked to the removed member after 5 s", i)
		}
	}
	t.Logf("every node dropped the removed member %v after publish", time.Since(start).Round(time.Millisecond))
	// Host 4 learns it was removed (on its link, or from the roster a
	// member pushes when it refuses a redial) and then redials only every
	// few minutes; until then every redial is refused.
	waitFor(t, "host 4 knowing it was removed", 30*time.Second, func() bool {
		var st struct {
			Removed bool `json:"removed"`
		}
		meshctlJSON(t, meshctl, &st, "--home", homes[4], "status")
		return st.Removed
	})
	for i := 0; i < n-1; i++ {
		if _, has := peerKeys(t, meshctl, homes[i])[keys[4]]; has {
			t.Fatalf("host %d relinked the removed member", i)
		}
	}
	var s struct {
		Counters map[string]uint64 `json:"counters"`
	}
	meshctlJSON(t, meshctl, &s, "--home", homes[0], "status")
	if s.Counters["link.removed_member"] == 0 {
		t.Fatalf("host 0 did not count the disconnect: %v", s.Counters)
	}
}

// startSeededHosts runs meshd on every host with --no-mdns, hosts 1..n-1
// seeded with host 0, and waits until each answers status.
func startSeededHosts(t *testing.T, nw *netnstest.Net, meshd, meshctl string, homes []string, pinned string) []*daemon {
	t.Helper()
	seed := "tcp://" + nw.Host(0).IP.String() + ":7437"
	var ds []*daemon
	for i := range homes {
		args := []string{"--home", homes[i], "--roster", pinned, "--listen", "tcp://0.0.0.0:7437", "--no-unix", "--no-mdns"}
		if i > 0 {
			args = append(args, "--seed", seed)
		}
		ds = append(ds, startDaemonCmd(t, nw.Host(i).Command(context.Background(), meshd, args...), homes[i]))
	}
	for i := range ds {
		waitStatus(t, meshctl, homes[i], ds[i])
	}
	return ds
}
