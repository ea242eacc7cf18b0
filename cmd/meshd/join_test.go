package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// inviteJSON is meshctl invite --json.
type inviteJSON struct {
	ID, Role, Name, State, Token string
	UsedBy                       string `json:"used_by"`
}

// waitCounter waits until counter name of the node on h reaches want.
func waitCounter(t *testing.T, meshctl, h, name string, want uint64) {
	t.Helper()
	var c map[string]uint64
	if !testwait.Until(10*time.Second, func() bool { c = counters(t, meshctl, h); return c[name] >= want }) {
		t.Fatalf("%s: counter %s = %d, want %d: %v", h, name, c[name], want, c)
	}
}

// TestInviteJoin: an admin's node makes an invite; a fresh home joins with
// it and a plain meshd (no --seed, no --roster) then links. The token
// works once; a revoked one and one with a wrong secret are refused.
func TestInviteJoin(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	sa := waitStatus(t, meshctl, a, da)

	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "operator", "--name", "bob", "--expires", "1h")
	if inv.State != "usable" || inv.Role != "operator" || !strings.HasPrefix(inv.Token, proto.InviteTokenPrefix) {
		t.Fatalf("invite: %+v", inv)
	}
	if strings.Contains(da.stderr.String(), inv.Token) || strings.Contains(da.stderr.String(), inv.Token[len(proto.InviteTokenPrefix):len(proto.InviteTokenPrefix)+40]) {
		t.Fatal("meshd logged the token")
	}

	// Join through the token on a fresh home.
	b := filepath.Join(tmp, "bob")
	var joined struct {
		Org, Role, Name string
		RosterVersion   uint64 `json:"roster_version"`
		Seeds           []string
	}
	meshctlJSON(t, meshctl, &joined, "--home", b, "join", inv.Token)
	if joined.Org != sa.Org || joined.Role != "operator" || joined.Name != "bob" || joined.RosterVersion != 2 || len(joined.Seeds) == 0 {
		t.Fatalf("join: %+v", joined)
	}
	// bob reached alice over TCP: he keeps no Unix socket as a seed, though
	// alice advertises hers. A seeds file an older join wrote with a Unix
	// socket of another host is not dialled.
	if !slices.ContainsFunc(sa.Listen, func(s string) bool { return strings.HasPrefix(s, "unix:") }) {
		t.Fatalf("alice listens on no Unix socket: %v", sa.Listen)
	}
	seedsFile := filepath.Join(b, "seeds")
	sb, err := os.ReadFile(seedsFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sb), "unix:") || slices.ContainsFunc(joined.Seeds, func(s string) bool { return strings.HasPrefix(s, "unix:") }) {
		t.Fatalf("a joiner over TCP keeps a Unix socket as a seed: %v\n%s", joined.Seeds, sb)
	}
	if err := os.WriteFile(seedsFile, append(sb, "unix:///nonexistent/other-host/.meshd/link.sock\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	db := startDaemon(t, meshd, b, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, b, db)
	peers := waitPeers(t, meshctl, b, 1, 15*time.Second)
	if _, ok := peers[sa.Key]; !ok {
		t.Fatalf("bob's peers %v lack alice", peers)
	}
	if c := counters(t, meshctl, b); c["dial.seed_failed"] != 0 || c["seeds.skipped.unix_not_local"] != 1 {
		t.Fatalf("bob: dial.seed_failed %d, seeds.skipped.unix_not_local %d; want 0 and 1",
			c["dial.seed_failed"], c["seeds.skipped.unix_not_local"])
	}
	if doc := meshctlRun(t, meshctl, "--home", b, "doctor").stdout; strings.Contains(doc, "seeds failing") || strings.Contains(doc, "seeds of another org") {
		t.Fatalf("doctor after join:\n%s", doc)
	}
	var list struct{ Invites []inviteJSON }
	meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
	if len(list.Invites) != 1 || list.Invites[0].State != "used" || list.Invites[0].UsedBy == "" {
		t.Fatalf("invite list after join: %+v", list)
	}

	// The token is single-use: a second fresh home is refused.
	c := filepath.Join(tmp, "carol")
	r := meshctlRun(t, meshctl, "--home", c, "join", inv.Token, "--timeout", "10s")
	if r.code != 1 || !strings.Contains(r.stderr, "refused the invite") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("second use of a token: %+v", r)
	}
	waitCounter(t, meshctl, a, "invite.rejected.used", 1)

	// A revoked invite is refused.
	var inv2 inviteJSON
	meshctlJSON(t, meshctl, &inv2, "--home", a, "invite", "--role", "member")
	meshctlOK(t, meshctl, "--home", a, "invite", "revoke", inv2.ID)
	if r := meshctlRun(t, meshctl, "--home", a, "invite", "revoke", inv2.ID); r.code != 1 || !strings.Contains(r.stderr, "already revoked") {
		t.Fatalf("revoking twice: %+v", r)
	}
	if r := meshctlRun(t, meshctl, "--home", c, "join", inv2.Token, "--timeout", "10s"); r.code != 1 || !strings.Contains(r.stderr, "refused the invite") {
		t.Fatalf("revoked token: %+v", r)
	}
	waitCounter(t, meshctl, a, "invite.rejected.revoked", 1)

	// An expired invite is refused by the node, even when the token says
	// it is still good: the node's record decides. (The invite's expiry is
	// moved into the past while alice is stopped; the token still reaches
	// her through her link socket, whose path survives the restart.)
	var inv3 inviteJSON
	meshctlJSON(t, meshctl, &inv3, "--home", a, "invite", "--role", "member", "--expires", "1m")
	if err := da.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ipath := filepath.Join(a, "invites.json")
	raw, err := os.ReadFile(ipath)
	if err != nil {
		t.Fatal(err)
	}
	var stored []map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	for _, s := range stored {
		if s["id"] == inv3.ID {
			s["expires"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		}
	}
	if raw, err = json.Marshal(stored); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ipath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	da = startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, a, da)
	if r := meshctlRun(t, meshctl, "--home", c, "join", inv3.Token, "--timeout", "10s"); r.code != 1 || !strings.Contains(r.stderr, "refused the invite") {
		t.Fatalf("expired invite: %+v", r)
	}
	waitCounter(t, meshctl, a, "invite.rejected.expired", 1)
	meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
	if len(list.Invites) != 3 || list.Invites[0].State != "expired" || list.Invites[2].State != "used" {
		t.Fatalf("invites after a restart: %+v", list)
	}

	// Nothing that failed made carol a member.
	var ros struct{ Members []struct{ Name string } }
	meshctlJSON(t, meshctl, &ros, "--home", a, "roster", "show")
	if len(ros.Members) != 2 {
		t.Fatalf("roster after refused joins: %+v", ros)
	}
	if err := db.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// TestInviteHostileJoiner: a joiner built from the project's transport
// presents a known invite id with a wrong secret. The handshake completes
// on its side (message 3 is its last), but it is sent nothing but the
// goodbye every refused peer gets, the same whatever was wrong: no roster,
// no peers, no envelopes; the link is closed and the refusal is counted.
// The invite stays usable.
func TestInviteHostileJoiner(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	waitStatus(t, meshctl, a, da)
	meshctlOK(t, meshctl, "--home", a, "channel", "create", "ops")
	meshctlOK(t, meshctl, "--home", a, "send", "#ops", "secret plans")
	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "member")
	tok, err := proto.ParseInviteToken(inv.Token)
	if err != nil {
		t.Fatal(err)
	}

	attacker, _, err := home.Home{Dir: filepath.Join(tmp, "mallory")}.Init("mallory")
	if err != nil {
		t.Fatal(err)
	}
	// try returns the frames a joiner presenting proof is sent, but for
	// the goodbye every refused peer gets, and that goodbye's reason.
	try := func(proof *proto.InviteProof) (frames int, goodbye string) {
		cfg := transport.Config{Identity: attacker.Key, Org: tok.Org,
			Payload: func() proto.HandshakePayload { return proto.HandshakePayload{Name: "mallory", Invite: proof} }}
		addr, err := transport.ParseAddr(tok.Addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := transport.Dial(ctx, addr, cfg, &tok.Admin)
		if err != nil {
			return 0, "" // refused during the handshake: nothing learnt either
		}
		var mu sync.Mutex
		got := make(chan struct{}, 1)
		l.Start(func(f []byte) {
			mu.Lock()
			defer mu.Unlock()
			if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameGoodbye {
				goodbye = string(f[1:])
				return
			}
			frames++
			select {
			case got <- struct{}{}:
			default:
			}
		})
		defer l.Close()
		select {
		case <-l.Done(): // frames are handled before the link ends
		case <-got:
		case <-ctx.Done():
			t.Fatal("the admin's node neither closed nor served a joiner's link")
		}
		mu.Lock()
		defer mu.Unlock()
		return frames, goodbye
	}
	bad := tok.Proof()
	bad.Secret[0] ^= 1
	n, byeBad := try(bad)
	if n != 0 {
		t.Fatalf("a joiner with a wrong secret was sent %d frames besides the goodbye", n)
	}
	unknown := tok.Proof()
	unknown.ID[0] ^= 1
	n, byeUnknown := try(unknown)
	if n != 0 {
		t.Fatalf("a joiner with an unknown invite was sent %d frames besides the goodbye", n)
	}
	n, byeNone := try(nil)
	if n != 0 {
		t.Fatalf("a joiner with no invite was sent %d frames besides the goodbye", n)
	}
	// No oracle: every refusal says the same, whatever was wrong.
	if byeBad != byeNone || byeUnknown != byeNone {
		t.Fatalf("refusals differ: wrong secret %q, unknown invite %q, no invite %q", byeBad, byeUnknown, byeNone)
	}
	waitCounter(t, meshctl, a, "invite.rejected.bad_secret", 1)
	waitCounter(t, meshctl, a, "invite.rejected.unknown", 1)
	cs := counters(t, meshctl, a)
	if cs["link.up"] != 0 {
		t.Fatalf("links came up for refused joiners: %v", cs)
	}
	var list struct{ Invites []inviteJSON }
	meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
	if list.Invites[0].State != "usable" {
		t.Fatalf("a wrong secret used up the invite: %+v", list)
	}
	// The genuine token still works after the failed attempts.
	if n, bye := try(tok.Proof()); n == 0 {
		t.Fatalf("the valid invite was refused after failed attempts (goodbye %q)", bye)
	}
}

// TestJoinReplacesOneNodeOrg: a home that ran plain meshd once holds a
// one-node org; join says it replaces it and moves it aside. A home of
// an org with other members is refused unless --force.
func TestJoinReplacesOneNodeOrg(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	sa := waitStatus(t, meshctl, a, da)

	solo := filepath.Join(tmp, "solo")
	ds := startDaemon(t, meshd, solo, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "solo")
	ss := waitStatus(t, meshctl, solo, ds)
	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "member")
	// Not while meshd runs on the home: join would change its files under it.
	if r := meshctlRun(t, meshctl, "--home", solo, "join", inv.Token); r.code != 1 || !strings.Contains(r.stderr, "stop meshd") {
		t.Fatalf("join while meshd runs: %+v", r)
	}
	if err := ds.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out := meshctlOK(t, meshctl, "--home", solo, "join", inv.Token)
	if !strings.Contains(out, "one-node org") || !strings.Contains(out, ss.Org) || !strings.Contains(out, "left-") {
		t.Fatalf("join over a one-node org:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(solo, "seeds")); err != nil {
		t.Fatal(err)
	}
	ds = startDaemon(t, meshd, solo, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	if s := waitStatus(t, meshctl, solo, ds); s.Org != sa.Org || s.Key != ss.Key {
		t.Fatalf("after join: org %s key %s, want org %s and the same key %s", s.Org, s.Key, sa.Org, ss.Key)
	}
	waitPeers(t, meshctl, solo, 1, 15*time.Second)
	if err := ds.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// solo now belongs to a real org (alice's, two members): joining
	// another org is refused without --force.
	other := filepath.Join(tmp, "other")
	do := startDaemon(t, meshd, other, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "other", "--org", "beta")
	waitStatus(t, meshctl, other, do)
	var inv2 inviteJSON
	meshctlJSON(t, meshctl, &inv2, "--home", other, "invite", "--role", "member")
	r := meshctlRun(t, meshctl, "--home", solo, "join", inv2.Token)
	if r.code != 1 || !strings.Contains(r.stderr, "belongs to org") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("join of another org without --force: %+v", r)
	}
	var res struct {
		Org, Left string
	}
	meshctlJSON(t, meshctl, &res, "--home", solo, "join", inv2.Token, "--force")
	if res.Org != "beta" || res.Left != sa.Org {
		t.Fatalf("join --force: %+v", res)
	}
}

// TestPendingJoin: a node that is not in the roster dials an admin's node
// and is refused; the admin sees it in roster pending, adds it by its
// fingerprint and publishes, and the node links on its next attempt.
func TestPendingJoin(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	sa := waitStatus(t, meshctl, a, da)
	c := filepath.Join(tmp, "carol")
	meshctlOK(t, meshctl, "--home", c, "init", "--name", "carol")
	dc := startDaemon(t, meshd, c, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--no-unix",
		"--roster", filepath.Join(a, "roster.cbor"), "--seed", tcpListen(t, sa))
	sc := waitStatus(t, meshctl, c, dc)
	if sc.Role != "" && sc.Role != "none" {
		t.Fatalf("carol's role before she is added: %q", sc.Role)
	}
	dc.waitLog("not a member of its roster", 5*time.Second)

	var p struct {
		Nodes []struct {
			Key, Fingerprint, Name, Address string
			Attempts                        uint64
		}
	}
	if !testwait.Until(10*time.Second, func() bool {
		meshctlJSON(t, meshctl, &p, "--home", a, "roster", "pending")
		return len(p.Nodes) == 1
	}) {
		t.Fatalf("roster pending: %+v", p)
	}
	if n := p.Nodes[0]; n.Key != sc.Key || n.Name != "carol" || n.Attempts == 0 || !strings.HasPrefix(n.Address, "127.0.0.1:") {
		t.Fatalf("pending entry: %+v", n)
	}
	txt := meshctlOK(t, meshctl, "--home", a, "roster", "pending")
	if !strings.Contains(txt, sc.Fingerprint) || !strings.Contains(txt, "roster add") {
		t.Fatalf("roster pending text:\n%s", txt)
	}
	if r := meshctlRun(t, meshctl, "--home", a, "roster", "add", "deadbeef", "--role", "member"); r.code != 1 || !strings.Contains(r.stderr, "no pending node") {
		t.Fatalf("roster add of an unknown fingerprint: %+v", r)
	}
	out := meshctlOK(t, meshctl, "--home", a, "roster", "add", sc.Fingerprint, "--role", "member")
	if !strings.Contains(out, "carol") {
		t.Fatalf("roster add by fingerprint: %s", out)
	}
	meshctlOK(t, meshctl, "--home", a, "roster", "publish")
	waitPeers(t, meshctl, c, 1, 15*time.Second)
	meshctlJSON(t, meshctl, &p, "--home", a, "roster", "pending")
	if len(p.Nodes) != 0 {
		t.Fatalf("carol still pending after she linked: %+v", p)
	}
	var st struct{ Role string }
	meshctlJSON(t, meshctl, &st, "--home", c, "status")
	if st.Role != "member" {
		t.Fatalf("carol's role after publish: %q", st.Role)
	}
}

// TestInviteJoinQuorumTwo: where the roster needs two admins' signatures,
// a valid invite makes the inviting node write the update adding the
// joiner, signed by itself, and wait; the joiner keeps asking. A second
// admin signs, the first publishes, and the joiner is admitted.
func TestInviteJoinQuorumTwo(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, dv := filepath.Join(tmp, "alice"), filepath.Join(tmp, "dave")
	var daveID struct{ Key string }
	meshctlJSON(t, meshctl, &daveID, "--home", dv, "init", "--name", "dave")
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", daveID.Key, "--role", "admin", "--name", "dave")
	meshctlOK(t, meshctl, "--home", a, "roster", "quorum", "2")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, a, da)

	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "member", "--name", "erin")
	e := filepath.Join(tmp, "erin")
	join := exec.Command(meshctl, "--home", e, "join", inv.Token, "--timeout", "60s")
	join.Env = cleanEnv()
	var out syncBuffer
	join.Stdout, join.Stderr = &out, &out
	if err := join.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- join.Wait() }()
	t.Cleanup(func() { join.Process.Kill() })

	var list struct {
		Invites []struct {
			State  string
			Update string `json:"roster_update"`
		}
	}
	if !testwait.Until(15*time.Second, func() bool {
		meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
		return list.Invites[0].State == "waiting"
	}) {
		t.Fatalf("invite never waited for signatures: %+v\njoin: %s", list, out.String())
	}
	upd := list.Invites[0].Update
	var pend struct {
		Updates []struct {
			File                          string
			Signatures, Required, Missing int
		}
	}
	meshctlJSON(t, meshctl, &pend, "--home", a, "roster", "pending")
	if len(pend.Updates) != 1 || pend.Updates[0].File != upd || pend.Updates[0].Missing != 1 {
		t.Fatalf("roster pending: %+v (update %s)", pend, upd)
	}
	select {
	case err := <-done:
		t.Fatalf("join ended before the update was signed: %v\n%s", err, out.String())
	default:
	}
	meshctlOK(t, meshctl, "--home", dv, "roster", "sign", upd, "--current", filepath.Join(a, "roster.cbor"))
	meshctlOK(t, meshctl, "--home", a, "roster", "publish", upd)
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "joined org \"acme\"") || !strings.Contains(out.String(), "waiting") {
			t.Fatalf("join: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("join did not finish after the update was published:\n%s", out.String())
	}
	meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
	if list.Invites[0].State != "used" {
		t.Fatalf("invite after publish: %+v", list)
	}
}

// TestPendingFlood: an attacker dials an admin's node with many fresh
// keys of the right org, from one address. Each is refused and counted;
// the address holds at most 8 entries of the pending list (the rest are
// counted as refused), so the flood neither grows the list nor pushes
// out a node that knocked before it.
func TestPendingFlood(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns", "--name", "alice")
	sa := waitStatus(t, meshctl, a, da)
	addr, err := transport.ParseAddr(tcpListen(t, sa))
	if err != nil {
		t.Fatal(err)
	}
	knock := func(i int) {
		id, _, err := home.Home{Dir: filepath.Join(tmp, fmt.Sprintf("k%d", i))}.Init(fmt.Sprintf("knock%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := transport.Dial(ctx, addr, transport.Config{Identity: id.Key, Org: sa.Org,
			Payload: func() proto.HandshakePayload { return proto.HandshakePayload{Name: id.Name} }}, nil)
		if err == nil {
			l.Start(func([]byte) {})
			<-l.Done()
		}
	}
	knock(0) // an early, genuine knock
	const n = 200
	start := time.Now()
	var wg sync.WaitGroup
	// Half the listener's handshakes in progress per source (8): the node
	// frees a handshake's place a moment after the knocker sees the
	// refusal, so 8 knockers at a time could find the place still taken
	// and be shed (handshake.shed.source_limit), not refused as knocks.
	const atOnce = 4
	sem := make(chan struct{}, atOnce)
	for i := 1; i <= n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			knock(i)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	waitCounter(t, meshctl, a, "handshake.rejected.not_member", n+1)
	cs := counters(t, meshctl, a)
	var p struct{ Nodes []struct{ Name string } }
	meshctlJSON(t, meshctl, &p, "--home", a, "roster", "pending")
	// knock0 and 7 more from the flood's address: its share.
	refused := cs["pending.refused.source_full"] + cs["pending.refused.rate_limited"]
	if len(p.Nodes) > 8 || refused+uint64(len(p.Nodes)) != n+1 {
		t.Fatalf("pending after %d fresh keys: %d entries, %d refused", n+1, len(p.Nodes), refused)
	}
	found := false
	for _, x := range p.Nodes {
		found = found || x.Name == "knock0"
	}
	if !found {
		t.Fatal("the flood pushed out the node that knocked first")
	}
	t.Logf("%d refused handshakes from fresh keys in %v (%.0f/s, %d at a time); pending holds %d, %d refused",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), atOnce, len(p.Nodes), refused)
}
