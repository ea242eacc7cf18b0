package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
)

// newQuorumOrg starts alice and bob, both admins, and carol, a member, of
// a roster whose quorum is 2, seeded by alice's TCP address.
func newQuorumOrg(t *testing.T) *histOrg {
	t.Helper()
	meshd, meshctl := buildBinaries(t)
	names := []string{"alice", "bob", "carol"}
	o := &histOrg{t: t, meshd: meshd, meshctl: meshctl, names: names,
		homes: map[string]string{}, args: map[string][]string{}, ds: map[string]*daemon{}}
	tmp := t.TempDir()
	keys := map[string]string{}
	for _, n := range names {
		o.homes[n] = filepath.Join(tmp, n)
		var id struct {
			Key string `json:"key"`
		}
		meshctlJSON(t, meshctl, &id, "--home", o.homes[n], "init", "--name", n)
		keys[n] = id.Key
	}
	a := o.homes["alice"]
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["bob"], "--role", "admin", "--name", "bob")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", keys["carol"], "--role", "member", "--name", "carol")
	meshctlOK(t, meshctl, "--home", a, "roster", "quorum", "2")
	pinned := filepath.Join(tmp, "roster.cbor")
	b, err := os.ReadFile(filepath.Join(a, "roster.cbor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pinned, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The first roster of an org needs its own quorum.
	meshctlOK(t, meshctl, "--home", o.homes["bob"], "roster", "sign", pinned)
	base := []string{"--listen", "tcp://127.0.0.1:0", "--no-mdns", "--metrics", "127.0.0.1:0"}
	o.args["alice"] = base
	o.start("alice")
	seed := tcpListen(t, waitStatus(t, meshctl, a, o.ds["alice"]))
	for _, n := range names[1:] {
		o.args[n] = append(append([]string(nil), base...), "--roster", pinned, "--seed", seed)
		o.start(n)
	}
	for _, n := range names {
		waitPeers(t, meshctl, o.homes[n], 2, 15*time.Second)
	}
	return o
}

// policyRejected scrapes node name's count of policies refused for reason.
func (o *histOrg) policyRejected(name, reason string) float64 {
	o.t.Helper()
	mfs := scrapeFamilies(o.t, "http://"+waitMetricsAddr(o.t, o.ds[name])+"/metrics")
	for _, m := range mfs["meshd_policy_updates_rejected_total"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "reason" && lp.GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestChannelEditQuorum: in an org whose roster quorum is 2, one admin
// creates a channel alone, but an edit needs a second admin's signature:
// channel set alone is refused with the way to co-sign, a version
// published with one signature is refused (policy.rejected.quorum), and
// one co-signed with channel sign is applied everywhere. An older version
// published after a newer one is refused as a rollback.
func TestChannelEditQuorum(t *testing.T) {
	testpar.Parallel(t)
	o := newQuorumOrg(t)
	o.ctl("alice", "channel", "create", "ops")
	o.waitVersion("ops", 1, "bob", "carol")

	// Alone: refused, nothing applied, the way to co-sign named.
	r := meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "channel", "set", "ops", "--history", "off")
	if r.code != 1 || !strings.Contains(r.stderr, "1 of 2 required admin signatures") || !strings.Contains(r.stderr, "channel sign") {
		t.Fatalf("channel set below quorum: exit %d\n%s", r.code, r.stderr)
	}
	if v := o.channelOf("alice", "ops").Version; v != 1 {
		t.Fatalf("alice holds v%d after a refused edit", v)
	}
	if c := o.policyRejected("alice", "quorum"); c != 1 {
		t.Fatalf("policy.rejected.quorum %v, want 1", c)
	}

	// Drafted with --out: signed once, not applied, and refused if
	// published so.
	v2 := filepath.Join(t.TempDir(), "ops-v2.cbor")
	out := o.ctl("alice", "channel", "set", "ops", "--history", "off", "--out", v2)
	if !strings.Contains(out, "1 of 2 required admin signatures") || !strings.Contains(out, "meshctl channel sign "+v2) {
		t.Fatalf("channel set --out:\n%s", out)
	}
	if v := o.channelOf("alice", "ops").Version; v != 1 {
		t.Fatalf("a draft was applied: alice holds v%d", v)
	}
	r = meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "channel", "publish", v2)
	if r.code != 1 || !strings.Contains(r.stderr, "too few admin signatures") || !strings.Contains(r.stderr, "channel sign") {
		t.Fatalf("publish with one signature: exit %d\n%s", r.code, r.stderr)
	}
	// A second signature by the same admin does not count twice.
	if out := o.ctl("alice", "channel", "sign", v2); !strings.Contains(out, "1 of 2") {
		t.Fatalf("alice signing again:\n%s", out)
	}
	// Bytes that are no policy are refused as such.
	junk := filepath.Join(t.TempDir(), "junk.cbor")
	if err := os.WriteFile(junk, []byte("not a policy"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = meshctlRun(t, o.meshctl, "--home", o.homes["alice"], "channel", "publish", junk)
	if r.code != 1 || !strings.Contains(r.stderr, "channel policy") {
		t.Fatalf("publishing junk: exit %d\n%s", r.code, r.stderr)
	}
	if c := o.policyRejected("alice", "malformed"); c != 1 {
		t.Fatalf("policy.rejected.malformed %v, want 1", c)
	}
	// A member cannot sign.
	r = meshctlRun(t, o.meshctl, "--home", o.homes["carol"], "channel", "sign", v2)
	if r.code != 1 || !strings.Contains(r.stderr, "not an admin") {
		t.Fatalf("carol signing: exit %d\n%s", r.code, r.stderr)
	}

	// bob co-signs; published on either node, it reaches all.
	if out := o.ctl("bob", "channel", "sign", v2); !strings.Contains(out, "2 of 2") || !strings.Contains(out, "channel publish") {
		t.Fatalf("bob signing:\n%s", out)
	}
	if out := o.ctl("bob", "channel", "publish", v2); !strings.Contains(out, "published #ops v2") {
		t.Fatalf("publish:\n%s", out)
	}
	o.waitVersion("ops", 2, "alice", "carol")
	if c := o.channelOf("carol", "ops"); c.AllowHistoryFetch || len(c.Versions) == 0 || len(c.Versions[len(c.Versions)-1].Signers) != 2 {
		t.Fatalf("carol's view of v2: %+v", c)
	}

	// v3, a tombstone, co-signed the same way; then v2 again is a rollback.
	v3 := filepath.Join(t.TempDir(), "ops-v3.cbor")
	o.ctl("bob", "channel", "delete", "ops", "--out", v3)
	o.ctl("alice", "channel", "sign", v3)
	o.ctl("alice", "channel", "publish", v3)
	o.waitVersion("ops", 3, "bob", "carol")
	if !o.channelOf("carol", "ops").Deleted {
		t.Fatal("carol does not see ops deleted")
	}
	r = meshctlRun(t, o.meshctl, "--home", o.homes["carol"], "channel", "publish", v2)
	if r.code != 1 || !strings.Contains(r.stderr, "rollback") {
		t.Fatalf("publishing v2 over v3: exit %d\n%s", r.code, r.stderr)
	}
	if c := o.policyRejected("carol", "rollback"); c < 1 {
		t.Fatalf("policy.rejected.rollback %v on carol", c)
	}
}
