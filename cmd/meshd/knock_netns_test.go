//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/netnstest"
	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// TestKnockRogueLANCannotAdopt: on a LAN (network namespaces on a bridge,
// mDNS only, no seeds), a fresh node finds two orgs: "lan", whose admin
// it means to join, and "evil", a rogue node whose roster lists the fresh
// node. The rogue's roster, offered over a link only mDNS found, is not
// adopted; "lan" lists the fresh node as pending. Once lan's admin added
// it and its user confirmed lan by the admin's fingerprint (meshctl
// adopt), the fresh node adopts lan, and never evil.
func TestKnockRogueLANCannotAdopt(t *testing.T) {
	testpar.Parallel(t)
	if ok, why := netnstest.Available(); !ok {
		t.Skip(why)
	}
	meshd, meshctl := buildBinaries(t)
	nw := netnstest.NewBridge(t, 3)
	tmp := t.TempDir()
	h0, h1, h2 := filepath.Join(tmp, "admin"), filepath.Join(tmp, "rogue"), filepath.Join(tmp, "fresh")
	var fresh struct{ Key, Fingerprint string }
	meshctlJSON(t, meshctl, &fresh, "--home", h2, "init", "--name", "fresh")
	meshctlOK(t, meshctl, "--home", h0, "init", "--name", "admin")
	meshctlOK(t, meshctl, "--home", h0, "roster", "init", "--org", "lan")
	meshctlOK(t, meshctl, "--home", h1, "init", "--name", "rogue")
	meshctlOK(t, meshctl, "--home", h1, "roster", "init", "--org", "evil")
	meshctlOK(t, meshctl, "--home", h1, "roster", "add", fresh.Key, "--role", "member", "--name", "fresh")

	args := []string{"--listen", "tcp://0.0.0.0:7437", "--no-unix", "--mdns-interface", netnstest.HostIface}
	start := func(i int, h string) *daemon {
		cmd := nw.Host(i).Command(context.Background(), meshd, append([]string{"--home", h}, args...)...)
		d := startDaemonCmd(t, cmd, h)
		waitStatus(t, meshctl, h, d)
		return d
	}
	start(0, h0)
	start(1, h1)
	began := time.Now()
	d2 := start(2, h2)
	own := statusOrg(t, meshctl, h2)
	rogueFP, adminFP := statusFP(t, meshctl, h1), statusFP(t, meshctl, h0)

	// The rogue offers its roster at the fresh node's first knock: refused.
	waitFor(t, "the rogue's roster refused as unconfirmed", 30*time.Second, func() bool {
		return counters(t, meshctl, h2)["adopt.refused.unconfirmed"] >= 1
	})
	t.Logf("the rogue's roster was refused %v after the fresh node started", time.Since(began).Round(time.Millisecond))
	d2.waitLog("found by mDNS only", 5*time.Second)
	var st api.Adopt
	meshctlJSON(t, meshctl, &st, "--home", h2, "adopt")
	evil, ok := knockedOrg(st, "evil")
	if !ok || evil.Via != "mdns" || evil.State != "offered" || evil.Reason != "unconfirmed" || len(evil.Admins) != 1 || evil.Admins[0] != rogueFP {
		t.Fatalf("the rogue's offer on the fresh node: %+v", st)
	}
	// lan's admin lists the fresh node, marked fresh.
	var pn api.PendingNode
	waitFor(t, "the fresh node in lan's pending list", 30*time.Second, func() bool {
		pn, ok = pendingFrom(t, meshctl, h0, fresh.Fingerprint)
		return ok
	})
	if !pn.Fresh || pn.Org != own {
		t.Fatalf("pending entry on lan's admin: %+v, want fresh from %q", pn, own)
	}
	if org := statusOrg(t, meshctl, h2); org != own {
		t.Fatalf("the fresh node is in org %q, want still its own %q", org, own)
	}

	// lan adds it; its user confirms lan by the admin's fingerprint.
	meshctlOK(t, meshctl, "--home", h0, "roster", "add", fresh.Fingerprint, "--role", "member", "--name", "fresh")
	meshctlOK(t, meshctl, "--home", h0, "roster", "publish")
	meshctlJSON(t, meshctl, &st, "--home", h2, "adopt", adminFP)
	if len(st.Confirmed) != 1 || st.Confirmed[0] != adminFP {
		t.Fatalf("adopt %s: %+v", adminFP, st)
	}
	confirmed := time.Now()
	waitFor(t, "the fresh node to adopt lan", 30*time.Second, func() bool { return statusOrg(t, meshctl, h2) == "lan" })
	t.Logf("the fresh node ran in lan %v after meshctl adopt", time.Since(confirmed).Round(time.Millisecond))
	waitPeers(t, meshctl, h2, 1, 15*time.Second)
	if _, err := os.Stat(filepath.Join(h2, "seeds")); err != nil {
		t.Fatalf("no seeds file after adopting: %v", err)
	}
}

func knockedOrg(st api.Adopt, org string) (api.Knocked, bool) {
	for _, k := range st.Knocked {
		if k.Org == org {
			return k, true
		}
	}
	return api.Knocked{}, false
}
