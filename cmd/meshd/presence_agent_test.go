package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/node/api"
)

// presenceOf returns how viewer sees peer's presence ("unknown" if not at
// all); it asks viewer's meshd only, so peer sees no client call.
func (o *histOrg) presenceOf(viewer, peer string) string {
	o.t.Helper()
	return o.presenceEntry(viewer, peer).State
}

// presenceEntry returns viewer's row for peer (State "unknown" if none).
func (o *histOrg) presenceEntry(viewer, peer string) api.PresenceEntry {
	o.t.Helper()
	var p api.Presence
	if err := json.Unmarshal([]byte(o.ctl(viewer, "presence", "--json")), &p); err != nil {
		o.t.Fatal(err)
	}
	for _, e := range p.Entries {
		if e.Name == peer {
			return e
		}
	}
	return api.PresenceEntry{State: "unknown"}
}

// TestPresenceFollowsAgent: bob's presence, as alice sees it, follows what
// bob's agent does, with no presence call: away while a `meshctl wait`
// runs, online once it sends (while the wait still runs), away again
// after the hold, and, once no client has called bob's meshd for
// presence_away_after and then presence_offline_after, away and then
// offline though bob's meshd runs; a read brings it back online.
// `presence set` overrides it until `presence set auto`.
func TestPresenceFollowsAgent(t *testing.T) {
	testpar.First(t)
	o := newHistOrg(t, "alice", "bob")
	if err := o.ds["bob"].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o.args["bob"] = append(o.args["bob"], "--presence-away-after", "6s", "--presence-offline-after", "9s")
	o.start("bob")
	waitPeers(t, o.meshctl, o.homes["alice"], 1, 15*time.Second)
	waitFor(t, "alice seeing bob online (just started)", 15*time.Second, func() bool { return o.presenceOf("alice", "bob") == "online" })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wait := exec.CommandContext(ctx, o.meshctl, "--home", o.homes["bob"], "wait", "--timeout", "90s")
	wait.Env = cleanEnv()
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { wait.Wait(); close(waited) }()
	defer func() { cancel(); <-waited }()
	waitFor(t, "alice seeing bob away while bob's agent waits", 10*time.Second, func() bool { return o.presenceOf("alice", "bob") == "away" })

	// The agent acts: online at once, though its wait still runs.
	o.ctl("bob", "presence") // a call that only looks changes nothing
	if s := o.presenceOf("alice", "bob"); s != "away" {
		t.Fatalf("bob looked at its presence and alice sees it %s, want away", s)
	}
	o.ctl("bob", "dm", "alice", "on it")
	waitFor(t, "alice seeing bob online after it sent", 5*time.Second, func() bool { return o.presenceOf("alice", "bob") == "online" })
	// Bob's wait still runs, so once the hold passes bob is away again.
	waitFor(t, "alice seeing bob away again after the hold", 20*time.Second, func() bool { return o.presenceOf("alice", "bob") == "away" })
	select {
	case <-waited:
		t.Fatal("bob's wait ended early")
	default:
	}

	// No client at all: away, then offline, while meshd runs.
	cancel()
	<-waited
	waitFor(t, "alice seeing bob offline with no client", 30*time.Second, func() bool { return o.presenceOf("alice", "bob") == "offline" })
	o.ctl("bob", "inbox", "--json")
	waitFor(t, "alice seeing bob online after it read its inbox", 5*time.Second, func() bool { return o.presenceOf("alice", "bob") == "online" })

	// An override holds, activity notwithstanding, until auto.
	var set api.Presence
	if err := json.Unmarshal([]byte(o.ctl("bob", "presence", "set", "away", "--for", "1h", "--json")), &set); err != nil {
		t.Fatal(err)
	}
	if set.Agent == nil || set.Agent.Source != "override" || set.Agent.State != "away" {
		t.Fatalf("presence set away answered %+v", set.Agent)
	}
	waitFor(t, "alice seeing bob away (override)", 5*time.Second, func() bool { return o.presenceOf("alice", "bob") == "away" })
	o.ctl("bob", "dm", "alice", "still here")
	if s := o.presenceOf("alice", "bob"); s != "away" {
		t.Fatalf("bob acted under an away override and alice sees it %s", s)
	}
	out := o.ctl("bob", "presence", "set", "auto")
	if !strings.Contains(out, "follows the agent again: online") {
		t.Fatalf("presence set auto said %q", out)
	}
	waitFor(t, "alice seeing bob online after auto", 5*time.Second, func() bool { return o.presenceOf("alice", "bob") == "online" })
	r := meshctlRun(t, o.meshctl, "--home", o.homes["bob"], "presence", "set", "away", "--for", "200h")
	if r.code == 0 || !strings.Contains(r.stderr, "--for 200h0m0s: want 1s to 168h") {
		t.Fatalf("presence set --for 200h: exit %d, %s", r.code, r.stderr)
	}

	// A status note travels with presence.
	o.ctl("bob", "presence", "note", "running tests on main ✓", "--for", "10m")
	waitFor(t, "alice seeing bob's note", 5*time.Second, func() bool {
		return o.presenceEntry("alice", "bob").Note == "running tests on main ✓"
	})
	if out := o.ctl("alice", "presence"); !strings.Contains(out, "running tests on main ✓") {
		t.Fatalf("meshctl presence does not show the note:\n%s", out)
	}
	o.ctl("bob", "presence", "note", "--clear")
	waitFor(t, "alice seeing bob's note withdrawn", 5*time.Second, func() bool { return o.presenceEntry("alice", "bob").Note == "" })
	for _, bad := range []string{"two\nlines", "bidi \u202e", strings.Repeat("x", 257)} {
		r = meshctlRun(t, o.meshctl, "--home", o.homes["bob"], "presence", "note", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "bad presence note") {
			t.Fatalf("presence note %q: exit %d, %s", bad, r.code, r.stderr)
		}
	}
}
