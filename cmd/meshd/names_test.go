package main

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// TestNamesImpersonation drives the ways a name enters a roster against a
// real admin's node, with names that pose as a member's: an invite's
// --name with a zero-width space or a Cyrillic look-alike is refused; a
// joiner whose own name looks like a member's joins unnamed, and peers
// shows its name only as claimed, escaped; roster add FINGERPRINT does not
// take a knocker's name holding a bidi override; and once a roster made
// by older tools holds two look-alike names, inbox lines name the sender
// with its fingerprint.
func TestNamesImpersonation(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a, c, j := filepath.Join(tmp, "alice"), filepath.Join(tmp, "carol"), filepath.Join(tmp, "joiner")
	var carolID struct{ Key string }
	meshctlJSON(t, meshctl, &carolID, "--home", c, "init", "--name", "carol")
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	meshctlOK(t, meshctl, "--home", a, "roster", "add", carolID.Key, "--role", "member", "--name", "carol")
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	sa := waitStatus(t, meshctl, a, da)

	// Invite names that pose as another are refused.
	for name, want := range map[string]string{"alice\u200b": "zero-width", "car\u043el": "looks like", "\u202ecarol": "bidi"} {
		if r := meshctlRun(t, meshctl, "--home", a, "invite", "--role", "member", "--name", name); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("invite --name %+q: %+v", name, r)
		}
	}

	// A joiner without an invite name, whose own name looks like carol's,
	// joins unnamed.
	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "member")
	meshctlOK(t, meshctl, "--home", j, "init", "--name", "car\u043el")
	var joined struct{ Name, Key string }
	meshctlJSON(t, meshctl, &joined, "--home", j, "join", inv.Token)
	if joined.Name != "" {
		t.Fatalf("the joiner got the name %+q", joined.Name)
	}
	waitCounter(t, meshctl, a, "invite.claimed_name_refused", 1)
	dj := startDaemon(t, meshd, j, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	sj := waitStatus(t, meshctl, j, dj)
	waitPeers(t, meshctl, a, 1, 15*time.Second)
	var peers struct {
		Peers []struct {
			Name        string
			ClaimedName string `json:"claimed_name"`
		}
	}
	// The claimed name comes with the joiner's card, after the link.
	waitFor(t, "the joiner's claimed name at alice", 15*time.Second, func() bool {
		meshctlJSON(t, meshctl, &peers, "--home", a, "peers")
		return len(peers.Peers) == 1 && peers.Peers[0].ClaimedName != ""
	})
	if len(peers.Peers) != 1 || peers.Peers[0].Name != "" || peers.Peers[0].ClaimedName != "car\u043el" {
		t.Fatalf("peers: %+v", peers)
	}
	txt := meshctlOK(t, meshctl, "--home", a, "peers")
	if strings.Contains(txt, "car\u043el") || !strings.Contains(txt, `- claims "car\u043el"`) || !strings.Contains(txt, sj.Fingerprint) {
		t.Fatalf("peers shows the claimed name as a roster name:\n%s", txt)
	}

	// A knocker claiming a name with a bidi override: roster pending
	// escapes it, and roster add FINGERPRINT does not take it.
	_, mk, _ := ed25519.GenerateKey(nil)
	addr, err := transport.ParseAddr(tcpListen(t, sa))
	if err != nil {
		t.Fatal(err)
	}
	knock := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := transport.Dial(ctx, addr, transport.Config{Identity: mk, Org: sa.Org,
			Payload: func() proto.HandshakePayload { return proto.HandshakePayload{Name: "\u202elortnoc"} }}, nil)
		if err == nil {
			l.Start(func([]byte) {})
			<-l.Done()
		}
	}
	knock()
	fp := proto.PubKeyOf(mk).Fingerprint()
	txt = meshctlOK(t, meshctl, "--home", a, "roster", "pending")
	if strings.Contains(txt, "\u202e") || !strings.Contains(txt, `"\u202elortnoc"`) {
		t.Fatalf("roster pending prints a bidi override raw:\n%q", txt)
	}
	if r := meshctlRun(t, meshctl, "--home", a, "roster", "add", fp, "--role", "member"); r.code == 0 ||
		!strings.Contains(r.stderr, `claims the name "\u202elortnoc"`) || !strings.Contains(r.stderr, "--name") {
		t.Fatalf("roster add FINGERPRINT took a bidi name: %+v", r)
	}
	out := meshctlRun(t, meshctl, "--home", a, "roster", "add", fp, "--role", "member", "--name", "mallory")
	if out.code != 0 || !strings.Contains(out.stdout, "mallory") {
		t.Fatalf("roster add FINGERPRINT --name: %+v", out)
	}

	// Older tools let a look-alike name in: the roster alice signs here
	// names the joiner carоl beside carol. Inbox lines then show the
	// fingerprint with the name.
	id, err := home.Home{Dir: a}.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := home.Home{Dir: a}.LoadRoster()
	if err != nil {
		t.Fatal(err)
	}
	next := cur.Next()
	for i := range next.Members {
		if next.Members[i].Key.String() == sj.Key {
			next.Members[i].Name = "car\u043el"
		}
	}
	next.Members = slicesDeleteKey(next.Members, proto.PubKeyOf(mk)) // not published: mallory stays out
	if err := next.Sign(id.Key); err != nil {
		t.Fatal(err)
	}
	upd := filepath.Join(tmp, "lookalike.cbor")
	if err := home.WriteRoster(upd, next); err != nil {
		t.Fatal(err)
	}
	meshctlOK(t, meshctl, "--home", a, "roster", "publish", upd)
	meshctlOK(t, meshctl, "--home", a, "channel", "create", "general")
	waitFor(t, "the joiner to hold the new roster", 15*time.Second, func() bool {
		var s struct {
			RosterVersion uint64 `json:"roster_version"`
		}
		meshctlJSON(t, meshctl, &s, "--home", j, "status")
		return s.RosterVersion >= next.Version
	})
	meshctlOK(t, meshctl, "--home", j, "subscribe", "general")
	meshctlOK(t, meshctl, "--home", j, "send", "#general", "hello from carol")
	var line string
	waitFor(t, "alice's inbox to show the message", 15*time.Second, func() bool {
		line = meshctlOK(t, meshctl, "--home", a, "inbox")
		return strings.Contains(line, "hello from carol")
	})
	if !strings.Contains(line, "#general car\u043el ("+sj.Fingerprint+")") {
		t.Fatalf("an inbox line names a look-alike sender without its fingerprint:\n%s", line)
	}
}

func slicesDeleteKey(ms []roster.Member, k proto.PubKey) []roster.Member {
	out := ms[:0]
	for _, m := range ms {
		if !m.Key.Equal(k) {
			out = append(out, m)
		}
	}
	return out
}

// TestInviteRosterFull: when the roster cannot take the joiner (it holds
// the most members a roster may), a valid invite is refused and stays
// usable: the node neither signs an unchanged roster nor logs the member
// as added.
func TestInviteRosterFull(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "alice")
	meshctlOK(t, meshctl, "--home", a, "init", "--name", "alice")
	meshctlOK(t, meshctl, "--home", a, "roster", "init", "--org", "acme")
	h := home.Home{Dir: a}
	id, err := h.LoadIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := h.LoadRoster()
	if err != nil {
		t.Fatal(err)
	}
	full := cur.Next()
	for i := 0; len(full.Members) < roster.MaxMembers; i++ {
		var seed [ed25519.SeedSize]byte
		seed[0], seed[1], seed[2] = 0xfe, byte(i>>8), byte(i)
		if err := full.Add(roster.Member{Key: proto.PubKeyOf(ed25519.NewKeyFromSeed(seed[:])), Role: roster.RoleObserver}); err != nil {
			t.Fatal(err)
		}
	}
	if err := full.Sign(id.Key); err != nil {
		t.Fatal(err)
	}
	if err := home.WriteRoster(h.RosterPath(), full); err != nil {
		t.Fatal(err)
	}
	da := startDaemon(t, meshd, a, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	waitStatus(t, meshctl, a, da)
	var inv inviteJSON
	meshctlJSON(t, meshctl, &inv, "--home", a, "invite", "--role", "member")
	j := filepath.Join(tmp, "joiner")
	if r := meshctlRun(t, meshctl, "--home", j, "join", inv.Token, "--timeout", "10s"); r.code == 0 {
		t.Fatalf("join into a full roster: %+v", r)
	}
	waitCounter(t, meshctl, a, "invite.rejected.roster", 1)
	var list struct{ Invites []inviteJSON }
	meshctlJSON(t, meshctl, &list, "--home", a, "invite", "list")
	if len(list.Invites) != 1 || list.Invites[0].State != "usable" {
		t.Fatalf("invite after a refused add: %+v", list)
	}
	if strings.Contains(da.stderr.String(), "member added") {
		t.Fatal("meshd logged a member added to a full roster")
	}
	var st struct {
		RosterVersion uint64 `json:"roster_version"`
	}
	meshctlJSON(t, meshctl, &st, "--home", a, "status")
	if st.RosterVersion != full.Version {
		t.Fatalf("roster version %d after a refused add, want %d", st.RosterVersion, full.Version)
	}
}
