package ownpresence

import (
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestAgentActivityRules walks the rules that derive the agent's presence
// from its clients, on a clock of its own.
func TestAgentActivityRules(t *testing.T) {
	t0 := time.Now()
	a := newActivity(10*time.Minute, time.Hour, t0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	want := func(when time.Duration, st proto.PresenceState, why string) {
		t.Helper()
		if got := a.state(at(when)); got.State != st {
			t.Fatalf("at +%v (%s): %s (%s), want %s", when, why, got.State, got.Reason, st)
		}
	}
	want(0, proto.Online, "just started")
	want(9*time.Minute, proto.Online, "no client for less than presence_away_after")
	want(10*time.Minute, proto.Away, "no client for presence_away_after")
	want(time.Hour, proto.Offline, "no client for presence_offline_after")

	a.seen(at(time.Hour))
	want(time.Hour, proto.Online, "a client called")
	end := a.beginWait(at(time.Hour))
	want(time.Hour+time.Second, proto.Away, "a client waits")
	want(3*time.Hour, proto.Away, "a client waits, however long")
	a.acted(at(2 * time.Hour))
	want(2*time.Hour+time.Second, proto.Online, "it acted, while its wait runs")
	want(2*time.Hour+onlineHold, proto.Away, "the hold passed, the wait runs")
	end()
	end() // once only
	if got := a.state(time.Now()).Waiting; got != 0 {
		t.Fatalf("%d waiting after one wait ended twice", got)
	}

	// The end of a wait takes the real clock: start again on it.
	a = newActivity(10*time.Minute, time.Hour, time.Now().Add(-time.Minute))
	a.beginWait(time.Now())()
	now := time.Now()
	if got := a.state(now.Add(time.Second)); got.State != proto.Away {
		t.Fatalf("just after a wait ended: %s, want away (between polls)", got.State)
	}
	if got := a.state(now.Add(waitGrace)); got.State != proto.Online {
		t.Fatalf("%v after a wait ended: %s, want online", waitGrace, got.State)
	}

	a.setOverride(proto.Offline, now.Add(time.Minute))
	a.acted(now)
	if got := a.state(now.Add(time.Second)); got.State != proto.Offline || got.Source != presenceFromOverride {
		t.Fatalf("under an override: %+v", got)
	}
	if got := a.state(now.Add(time.Minute)); got.Source != presenceFromActivity {
		t.Fatalf("after the override ended: %+v", got)
	}
	a.setNote("running tests", now.Add(time.Minute))
	if got := a.state(now); got.Note != "running tests" {
		t.Fatalf("note %q", got.Note)
	}
	if got := a.state(now.Add(time.Minute)); got.Note != "" {
		t.Fatalf("note %q after it ended", got.Note)
	}

	never := newActivity(0, 0, t0)
	if got := never.state(at(1000 * time.Hour)); got.State != proto.Online {
		t.Fatalf("with presence_away_after 0: %s", got.State)
	}
}
