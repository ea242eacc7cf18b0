package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// pendingFrom returns the pending entry of the node fp on h's list, if
// listed.
func pendingFrom(t *testing.T, meshctl, h, fp string) (api.PendingNode, bool) {
	t.Helper()
	var p struct{ Nodes []api.PendingNode }
	meshctlJSON(t, meshctl, &p, "--home", h, "roster", "pending")
	for _, n := range p.Nodes {
		if n.Fingerprint == fp {
			return n, true
		}
	}
	return api.PendingNode{}, false
}

// statusOrg returns the org of the node on h, or "" while it does not
// answer (it may be starting again).
func statusOrg(t *testing.T, meshctl, h string) string {
	t.Helper()
	r := meshctlRun(t, meshctl, "--home", h, "status", "--json")
	if r.code != 0 {
		return ""
	}
	var s statusJSON
	if json.Unmarshal([]byte(r.stdout), &s) != nil {
		return ""
	}
	return s.Org
}

// inboxHasBody reports whether h's inbox holds a message with body.
func inboxHasBody(t *testing.T, meshctl, h, body string) bool {
	t.Helper()
	r := meshctlRun(t, meshctl, "--home", h, "inbox", "--all", "--json")
	var in api.Inbox
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &in) != nil {
		return false
	}
	for _, it := range in.Items {
		if it.Body == body {
			return true
		}
	}
	return false
}

// startAdmin starts alice, the admin of org acme, and returns her seed.
func startAdmin(t *testing.T, meshd, meshctl, a string) (*daemon, string) {
	t.Helper()
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	return da, tcpListen(t, waitStatus(t, meshctl, a, da))
}

// TestKnockToJoin: a fresh machine that runs plain meshd --seed ADMIN is
// listed in the admin's pending list, marked fresh; once the admin adds
// it and publishes, it adopts the org (its one-node org moved aside, no
// token) and exchanges DMs with the admin.
func TestKnockToJoin(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, f := filepath.Join(tmp, "alice"), filepath.Join(tmp, "fresh")
	da, seed := startAdmin(t, meshd, meshctl, a)

	began := time.Now()
	df := startDaemon(t, meshd, f, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "laptop", "--seed", seed)
	sf := waitStatus(t, meshctl, f, df)
	if sf.Org != "org-"+sf.Fingerprint {
		t.Fatalf("fresh node's org %q, want its own one-node org", sf.Org)
	}

	// Listed, marked fresh, with the org it came from.
	var pn api.PendingNode
	waitFor(t, "the fresh node in alice's pending list", 15*time.Second, func() bool {
		var ok bool
		pn, ok = pendingFrom(t, meshctl, a, sf.Fingerprint)
		return ok
	})
	t.Logf("the fresh node was listed %v after its meshd started", time.Since(began).Round(time.Millisecond))
	if !pn.Fresh || pn.Org != sf.Org || pn.Name != "laptop" {
		t.Fatalf("pending entry %+v: want fresh, from org %q, named laptop", pn, sf.Org)
	}
	txt := meshctlOK(t, meshctl, "--home", a, "roster", "pending")
	if !strings.Contains(txt, sf.Fingerprint) || !strings.Contains(txt, "fresh (\""+sf.Org+"\")") {
		t.Fatalf("roster pending text does not mark the node fresh:\n%s", txt)
	}
	// The fresh node knows where it knocked.
	var st api.Adopt
	meshctlJSON(t, meshctl, &st, "--home", f, "adopt")
	if !st.Fresh || len(st.Knocked) != 1 || st.Knocked[0].Org != "acme" || st.Knocked[0].Via != "seed" || st.Knocked[0].State != "pending" {
		t.Fatalf("adopt state on the fresh node: %+v", st)
	}
	// Doctor on the fresh node says what lets it in.
	if doc := meshctlRun(t, meshctl, "--home", f, "doctor").stdout; !strings.Contains(doc, "knocked at the seed") ||
		!strings.Contains(doc, "roster add "+sf.Fingerprint) {
		t.Fatalf("doctor on the fresh node:\n%s", doc)
	}
	// An org id is not a fingerprint: refused with why.
	if r := meshctlRun(t, meshctl, "--home", f, "adopt", "acme"); r.code != 1 || !strings.Contains(r.stderr, "any node on the LAN") {
		t.Fatalf("adopt acme: exit %d: %s", r.code, r.stderr)
	}

	// The admin adds it and publishes: it adopts acme and starts again.
	if r := meshctlRun(t, meshctl, "--home", a, "roster", "add", sf.Fingerprint, "--role", "member", "--name", "laptop"); r.code != 0 ||
		!strings.Contains(r.stderr, "it adopts this org once the roster is published") {
		t.Fatalf("roster add of the fresh node: exit %d: %s", r.code, r.stderr)
	}
	meshctlOK(t, meshctl, "--home", a, "roster", "publish")
	published := time.Now()
	waitFor(t, "the fresh node to adopt acme", 30*time.Second, func() bool { return statusOrg(t, meshctl, f) == "acme" })
	t.Logf("the fresh node ran in acme %v after the publish", time.Since(published).Round(time.Millisecond))
	df.waitLog("adopted org", 5*time.Second)
	left, _ := filepath.Glob(filepath.Join(f, "left-"+sf.Org+"-*", "roster.cbor"))
	if len(left) != 1 {
		t.Fatalf("the one-node org's roster was not moved aside: %v", left)
	}
	if b, err := os.ReadFile(filepath.Join(f, "seeds")); err != nil || !strings.Contains(string(b), seed) {
		t.Fatalf("seeds file after adopting: %q, %v; want %s", b, err, seed)
	}
	waitPeers(t, meshctl, f, 1, 15*time.Second)

	meshctlOK(t, meshctl, "--home", a, "dm", "@laptop", "welcome aboard")
	waitFor(t, "alice's DM at the adopted node", 10*time.Second, func() bool { return inboxHasBody(t, meshctl, f, "welcome aboard") })
	meshctlOK(t, meshctl, "--home", f, "dm", "@alice", "thanks")
	waitFor(t, "the adopted node's DM at alice", 10*time.Second, func() bool { return inboxHasBody(t, meshctl, a, "thanks") })

	for _, d := range []*daemon{da, df} {
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

// TestKnockOtherOrgNeverAdopted: a node of a real other org (two members)
// that dials an org's node is listed there as another org's node, not
// fresh, and stays in its org even when the admin adds it and publishes.
func TestKnockOtherOrgNeverAdopted(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, b, c := filepath.Join(tmp, "alice"), filepath.Join(tmp, "bob"), filepath.Join(tmp, "carol")
	da, seed := startAdmin(t, meshd, meshctl, a)

	var carol struct{ Key string }
	meshctlJSON(t, meshctl, &carol, "--home", c, "init", "--name", "carol")
	meshctlOK(t, meshctl, "--home", b, "init", "--name", "bob")
	meshctlOK(t, meshctl, "--home", b, "roster", "init", "--org", "bobco")
	meshctlOK(t, meshctl, "--home", b, "roster", "add", carol.Key, "--role", "member", "--name", "carol")
	db := startDaemon(t, meshd, b, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--seed", seed)
	sb := waitStatus(t, meshctl, b, db)

	var pn api.PendingNode
	waitFor(t, "bob in alice's pending list", 15*time.Second, func() bool {
		var ok bool
		pn, ok = pendingFrom(t, meshctl, a, sb.Fingerprint)
		return ok
	})
	if pn.Fresh || pn.Org != "bobco" {
		t.Fatalf("pending entry %+v: want org bobco, not fresh", pn)
	}
	if txt := meshctlOK(t, meshctl, "--home", a, "roster", "pending"); !strings.Contains(txt, "other org \"bobco\"") {
		t.Fatalf("roster pending text does not name the other org:\n%s", txt)
	}

	if doc := meshctlRun(t, meshctl, "--home", b, "doctor").stdout; !strings.Contains(doc, "stays in it even if the seed's org adds it") {
		t.Fatalf("doctor on bob:\n%s", doc)
	}
	// Added and published: bob is offered the roster and does not adopt.
	if r := meshctlRun(t, meshctl, "--home", a, "roster", "add", sb.Fingerprint, "--role", "member", "--name", "bob"); r.code != 0 ||
		!strings.Contains(r.stderr, "it stays in that org even when added") {
		t.Fatalf("roster add of bob: exit %d: %s", r.code, r.stderr)
	}
	meshctlOK(t, meshctl, "--home", a, "roster", "publish")
	waitFor(t, "bob to refuse the offered roster", 30*time.Second, func() bool {
		return counters(t, meshctl, b)["adopt.refused.not_fresh"] >= 1
	})
	if org := statusOrg(t, meshctl, b); org != "bobco" {
		t.Fatalf("bob's org is %q after the offer, want bobco", org)
	}
	var st api.Adopt
	meshctlJSON(t, meshctl, &st, "--home", b, "adopt")
	if st.Fresh || len(st.Knocked) == 0 || st.Knocked[0].State != "offered" || st.Knocked[0].Reason != "not_fresh" {
		t.Fatalf("adopt state on bob: %+v", st)
	}
	if txt := meshctlOK(t, meshctl, "--home", b, "adopt"); !strings.Contains(txt, "adopts no other org") || !strings.Contains(txt, "offered (not_fresh)") {
		t.Fatalf("meshctl adopt on bob:\n%s", txt)
	}
	if left, _ := filepath.Glob(filepath.Join(b, "left-*")); len(left) != 0 {
		t.Fatalf("bob's org was moved aside: %v", left)
	}
	// Confirming an org does not move a node of a real org either.
	r := meshctlRun(t, meshctl, "--home", b, "adopt", strings.TrimSpace(statusFP(t, meshctl, a)))
	if r.code != 1 || !strings.Contains(r.stderr, "belongs to org \"bobco\"") || !strings.Contains(r.stderr, "join --force") {
		t.Fatalf("adopt on bob: exit %d: %s", r.code, r.stderr)
	}
	for _, d := range []*daemon{da, db} {
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

func statusFP(t *testing.T, meshctl, h string) string {
	t.Helper()
	var s statusJSON
	meshctlJSON(t, meshctl, &s, "--home", h, "status")
	return s.Fingerprint
}
