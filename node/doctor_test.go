package node

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestDoctorDiskNearlyFull: below both thresholds (256 MiB and 2 % free)
// the disk check is a problem with its fix; above either, it is fine.
func TestDoctorDiskNearlyFull(t *testing.T) {
	m := newTestMesh(t, 1)
	m.writeRoster(0, m.roster)
	n := m.start(0)
	old := diskSpace
	t.Cleanup(func() { diskSpace = old })
	check := func() (string, string) {
		for _, c := range n.Doctor().Checks {
			if c.Name == "disk" {
				return c.Status, c.Fix
			}
		}
		t.Fatal("no disk check")
		return "", ""
	}
	diskSpace = func(string) (uint64, uint64, error) { return 100 << 20, 100 << 30, nil }
	if st, fix := check(); st != "problem" || fix == "" {
		t.Fatalf("100 MiB free of 100 GiB: %s %q", st, fix)
	}
	diskSpace = func(string) (uint64, uint64, error) { return 100 << 20, 1 << 30, nil }
	if st, _ := check(); st != "ok" {
		t.Fatalf("100 MiB free of 1 GiB (10 %%): %s", st)
	}
	diskSpace = old
	if st, _ := check(); st == "warn" {
		t.Fatal("the real disk's free space could not be measured")
	}
}

// TestDoctorForeignOrgExpires: a node of another org that mDNS stopped
// reporting (it left) no longer counts once foreignOrgFresh has passed,
// though the org is named while it is reported.
func TestDoctorForeignOrgExpires(t *testing.T) {
	m := newTestMesh(t, 1)
	m.writeRoster(0, m.roster)
	n := m.start(0)
	check := func() (string, string) {
		for _, c := range n.Doctor().Checks {
			if c.Name == "org" {
				return c.Status, c.Detail
			}
		}
		t.Fatal("no org check")
		return "", ""
	}
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	stray := proto.PubKey(pub)
	org := "org-" + stray.Fingerprint()
	n.sawForeignOrg(org, stray)
	if st, detail := check(); st == "ok" || !strings.Contains(detail, org) {
		t.Fatalf("a node of another org just seen: %s %q", st, detail)
	}
	// Last reported a foreignOrgFresh ago: it has left.
	n.diag.mu.Lock()
	f := n.diag.foreignOrgs[org]
	f.nodes[stray] = time.Now().Add(-foreignOrgFresh)
	f.last = f.nodes[stray]
	n.diag.mu.Unlock()
	if st, detail := check(); st != "ok" || strings.Contains(detail, org) {
		t.Fatalf("a node of another org gone for %v: %s %q", foreignOrgFresh, st, detail)
	}
}
