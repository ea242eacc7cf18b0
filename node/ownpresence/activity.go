package ownpresence

import (
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
)

// Presence from the agent's activity (docs/AGENTS.md "Presence"): the
// state this node announces follows what its local clients do, not the
// daemon's uptime. Online while and shortly after a client reads, sends
// or answers; Away while a client waits on the inbox (a wait, an inbox
// long-poll, an event stream); Away, then Offline, once no client has
// been seen for PresenceAwayAfter, then PresenceOfflineAfter; Offline at
// shutdown. `presence set` overrides it for a while.

// onlineHold is how long the agent stays Online after it acted: a loop
// that answers and goes back to waiting within it never shows Away, and
// its presence changes at most twice per hold.
const onlineHold = 10 * time.Second

// waitGrace is how long a wait that ended still counts as waiting: a
// client that long-polls in a loop (meshctl wait) is away between polls.
const waitGrace = 3 * time.Second

// DefaultOverride is how long `presence set` holds its state when the
// caller gives no duration; MaxOverride bounds any.
const (
	DefaultOverride = 30 * time.Minute
	MaxOverride     = 7 * 24 * time.Hour
)

// Sources of the announced state, in api.AgentPresence.Source.
const (
	presenceFromActivity = "activity"
	presenceFromOverride = "override"
)

// activity tracks the local clients' activity and derives the
// agent's presence. It is safe for concurrent use.
type activity struct {
	awayAfter, offlineAfter time.Duration

	mu            sync.Mutex
	waiters       int                 // guarded by mu: clients waiting on the inbox now
	lastSeen      time.Time           // guarded by mu: any client call (start counts)
	lastAct       time.Time           // guarded by mu: a read, send or answer
	lastWaitEnd   time.Time           // guarded by mu
	override      proto.PresenceState // guarded by mu
	overrideUntil time.Time           // guarded by mu
	note          string              // guarded by mu: the status note, until noteUntil
	noteUntil     time.Time           // guarded by mu
	publishedNote string              // guarded by mu: the note last announced
	// kick tells the presence loop that the state may have changed.
	kick chan struct{}
	// publishing serializes announcements (announcer.go), so that the
	// two envelopes of one announcement take consecutive seqs and one
	// change is announced once.
	publishing sync.Mutex
}

func newActivity(awayAfter, offlineAfter time.Duration, now time.Time) *activity {
	return &activity{awayAfter: awayAfter, offlineAfter: offlineAfter, lastSeen: now, kick: make(chan struct{}, 1)}
}

func (a *activity) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// seen records a client call that neither acts nor waits (status, peers).
func (a *activity) seen(now time.Time) {
	a.mu.Lock()
	a.lastSeen = later(a.lastSeen, now)
	a.mu.Unlock()
}

// acted records a read, a send or an answer: the agent is at work.
func (a *activity) acted(now time.Time) {
	a.mu.Lock()
	a.lastSeen, a.lastAct = later(a.lastSeen, now), later(a.lastAct, now)
	a.mu.Unlock()
	a.poke()
}

// beginWait records a client that starts waiting on the inbox; the
// returned function, called once, ends the wait.
func (a *activity) beginWait(now time.Time) (end func()) {
	a.mu.Lock()
	a.waiters++
	a.lastSeen = later(a.lastSeen, now)
	a.mu.Unlock()
	a.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			now := time.Now()
			a.waiters--
			a.lastSeen, a.lastWaitEnd = later(a.lastSeen, now), later(a.lastWaitEnd, now)
			a.mu.Unlock()
			a.poke()
		})
	}
}

// setOverride holds st until until; st 0 clears the override.
func (a *activity) setOverride(st proto.PresenceState, until time.Time) {
	a.mu.Lock()
	a.override, a.overrideUntil = st, until
	a.mu.Unlock()
	a.poke()
}

// setNote holds note until until; "" clears it.
func (a *activity) setNote(note string, until time.Time) {
	a.mu.Lock()
	a.note, a.noteUntil = note, until
	a.mu.Unlock()
	a.poke()
}

// published records the note last announced, and lastNote returns it.
func (a *activity) published(note string) {
	a.mu.Lock()
	a.publishedNote = note
	a.mu.Unlock()
}

func (a *activity) lastNote() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.publishedNote
}

// agentState is the derived presence and why.
type agentState struct {
	State         proto.PresenceState
	Note          string
	NoteUntil     time.Time
	Source        string
	Reason        string
	Waiting       int
	LastSeen      time.Time
	LastActive    time.Time
	OverrideUntil time.Time
}

// state derives the presence at now.
func (a *activity) state(now time.Time) agentState {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := agentState{Source: presenceFromActivity, Waiting: a.waiters, LastSeen: a.lastSeen, LastActive: a.lastAct}
	if a.note != "" && now.Before(a.noteUntil) {
		s.Note, s.NoteUntil = a.note, a.noteUntil
	}
	switch {
	case a.override != 0 && now.Before(a.overrideUntil):
		s.State, s.Source, s.Reason, s.OverrideUntil = a.override, presenceFromOverride, "set by presence set", a.overrideUntil
	case !a.lastAct.IsZero() && now.Sub(a.lastAct) < onlineHold:
		s.State, s.Reason = proto.Online, "a client read, sent or answered just now"
	case a.waiters > 0 || (!a.lastWaitEnd.IsZero() && now.Sub(a.lastWaitEnd) < waitGrace && a.lastWaitEnd.After(a.lastAct)):
		s.State, s.Reason = proto.Away, "a client waits on the inbox"
	case a.offlineAfter > 0 && now.Sub(a.lastSeen) >= a.offlineAfter:
		s.State, s.Reason = proto.Offline, "no client seen for "+a.offlineAfter.String()
	case a.awayAfter > 0 && now.Sub(a.lastSeen) >= a.awayAfter:
		s.State, s.Reason = proto.Away, "no client seen for "+a.awayAfter.String()
	default:
		s.State, s.Reason = proto.Online, "at work: no client waits on the inbox"
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
