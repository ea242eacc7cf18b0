package doctor

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// fakeHost is a node as the doctor sees it, with no links.
type fakeHost struct {
	key     ed25519.PrivateKey
	roster  *roster.Roster
	removed bool
	mdns    bool
	seeds   int
	failing []SeedDial
	members []MemberDial
	disk    func(string) (uint64, uint64, error)

	mu     sync.Mutex
	counts [NumCounters]int
}

func (h *fakeHost) Roster() *roster.Roster                     { return h.roster }
func (h *fakeHost) Self() proto.PubKey                         { return proto.PubKeyOf(h.key) }
func (h *fakeHost) Links() []*peers.Link                       { return nil }
func (h *fakeHost) RemovedSelf() bool                          { return h.removed }
func (h *fakeHost) MDNSRuns() bool                             { return h.mdns }
func (h *fakeHost) Seeds() (int, []SeedDial)                   { return h.seeds, h.failing }
func (h *fakeHost) FailingMembers() []MemberDial               { return h.members }
func (h *fakeHost) DiskSpace(p string) (uint64, uint64, error) { return h.disk(p) }

func (h *fakeHost) Count(c Counter) {
	h.mu.Lock()
	h.counts[c]++
	h.mu.Unlock()
}

func newKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newDoctor returns a doctor over a host that is the admin of org acme,
// with a second member, and a writable mailbox.
func newDoctor(t *testing.T) (*Diagnosis, *fakeHost) {
	admin := newKey(t)
	r, err := roster.New("acme", admin, "a")
	if err != nil {
		t.Fatal(err)
	}
	next := r.Next()
	if err := next.Add(roster.Member{Key: proto.PubKeyOf(newKey(t)), Role: roster.RoleMember, Name: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := next.Sign(admin); err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{key: admin, roster: next, disk: DiskSpace}
	home := t.TempDir()
	mbox := filepath.Join(home, "mailbox")
	if err := os.Mkdir(mbox, 0o700); err != nil {
		t.Fatal(err)
	}
	return New(h, Config{Home: home, MailboxDir: mbox}), h
}

func check(t *testing.T, d *Diagnosis, name string) api.DoctorCheck {
	t.Helper()
	for _, c := range d.Doctor().Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check", name)
	return api.DoctorCheck{}
}

// TestDiagnosisOverHost drives the doctor through its Host alone: a
// member with no link and failing dials is a links problem naming the
// member and why; a seed answering as another org is named with the fix
// for an org with members; mDNS failing with no seed is a discovery
// problem; a peer's clock far off is logged once and named, and the
// status page's largest skew is it; the mailbox is writable.
func TestDiagnosisOverHost(t *testing.T) {
	t.Parallel()
	d, h := newDoctor(t)
	other := h.roster.Members[0]
	if other.Key.Equal(h.Self()) {
		other = h.roster.Members[1]
	}
	addr := transport.Addr{Network: "tcp", Address: "192.0.2.5:7437"}
	h.members = []MemberDial{{Key: other.Key, Last: []peers.DialFailure{{Addr: addr, Err: errors.New("boom")}}}}
	if c := check(t, d, "links"); c.Status != "problem" || !strings.Contains(c.Detail, "b (") || !strings.Contains(c.Detail, "192.0.2.5:7437: boom") {
		t.Fatalf("links %+v", c)
	}
	h.seeds = 1
	h.failing = []SeedDial{{Addr: addr.String(), Fails: 3, Last: []peers.DialFailure{{Addr: addr, Err: transport.ErrWrongOrg}}}}
	if c := check(t, d, "seeds"); c.Status != "problem" || !strings.Contains(c.Detail, "as a node of another org") || !strings.Contains(c.Fix, "stays in it") {
		t.Fatalf("seeds %+v", c)
	}
	h.seeds, h.failing = 0, nil
	d.MDNSFailed(errors.New("no multicast"))
	if c := check(t, d, "discovery"); c.Status != "problem" || c.Fix != MDNSHint {
		t.Fatalf("discovery %+v", c)
	}
	now := time.Now()
	d.ObserveClock(other.Key, now.Add(time.Minute), false, now)
	if c := check(t, d, "clock"); c.Status != "ok" {
		t.Fatalf("an envelope not from its sender's own link moved the clock check: %+v", c)
	}
	d.ObserveFutureClock(other.Key, now.Add(time.Minute), true, now)
	d.ObserveClock(other.Key, now.Add(time.Minute), true, now)
	if c := check(t, d, "clock"); c.Status != "problem" || !strings.Contains(c.Detail, "b (") || !strings.Contains(c.Detail, "+60s") {
		t.Fatalf("clock %+v", c)
	}
	if skew, who := d.MaxSkew(now); skew != time.Minute || !who.Equal(other.Key) {
		t.Fatalf("max skew %v of %s", skew, who.Fingerprint())
	}
	if h.counts[ClockSkewed] != 1 {
		t.Fatalf("skew warned %d times in an hour", h.counts[ClockSkewed])
	}
	if c := check(t, d, "mailbox"); c.Status != "ok" {
		t.Fatalf("mailbox %+v", c)
	}
	if c := check(t, d, "membership"); c.Status != "ok" {
		t.Fatalf("membership %+v", c)
	}
}

// TestDoctorDiskNearlyFull: below both thresholds (256 MiB and 2 % free)
// the disk check is a problem with its fix; above either, it is fine.
func TestDoctorDiskNearlyFull(t *testing.T) {
	t.Parallel()
	d, h := newDoctor(t)
	h.disk = func(string) (uint64, uint64, error) { return 100 << 20, 100 << 30, nil }
	if c := check(t, d, "disk"); c.Status != "problem" || c.Fix == "" {
		t.Fatalf("100 MiB free of 100 GiB: %s %q", c.Status, c.Fix)
	}
	h.disk = func(string) (uint64, uint64, error) { return 100 << 20, 1 << 30, nil }
	if c := check(t, d, "disk"); c.Status != "ok" {
		t.Fatalf("100 MiB free of 1 GiB (10 %%): %s", c.Status)
	}
	h.disk = DiskSpace
	if c := check(t, d, "disk"); c.Status == "warn" {
		t.Fatal("the real disk's free space could not be measured")
	}
}

// TestDoctorForeignOrgExpires: a node of another org that mDNS stopped
// reporting (it left) no longer counts once ForeignOrgFresh has passed,
// though the org is named while it is reported.
func TestDoctorForeignOrgExpires(t *testing.T) {
	t.Parallel()
	d, h := newDoctor(t)
	stray := proto.PubKeyOf(newKey(t))
	org := "org-" + stray.Fingerprint()
	d.SawForeignOrg(org, stray)
	if c := check(t, d, "org"); c.Status == "ok" || !strings.Contains(c.Detail, org) || !strings.Contains(c.Fix, "meshctl invite --role member here") {
		t.Fatalf("a node of another org just seen: %+v", c)
	}
	if h.counts[ForeignOrg] != 1 {
		t.Fatalf("foreign org counted %d", h.counts[ForeignOrg])
	}
	// A ForeignOrgFresh later, it has left.
	start := time.Now()
	d.now = func() time.Time { return start.Add(ForeignOrgFresh) }
	if c := check(t, d, "org"); c.Status != "ok" || strings.Contains(c.Detail, org) {
		t.Fatalf("a node of another org gone for %v: %+v", ForeignOrgFresh, c)
	}
}
