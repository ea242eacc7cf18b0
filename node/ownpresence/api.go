package ownpresence

import (
	"net/http"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// The methods the control API calls (node/control's Backend).

// SetPresence holds our presence at req.State for req.ForSeconds (the
// default override when 0), instead of what the agent's activity gives;
// state "auto" ends an override. It announces the result at once and
// returns the presence table.
func (s *Announcer) SetPresence(req api.SetPresence) (api.Presence, error) {
	if req.ForSeconds < 0 || time.Duration(req.ForSeconds)*time.Second > MaxOverride {
		return api.Presence{}, apierr.BadRequest("for_seconds %d: want 0 (the default, %v) to %d", req.ForSeconds,
			DefaultOverride, int(MaxOverride/time.Second))
	}
	now := time.Now()
	d := DefaultOverride
	if req.ForSeconds > 0 {
		d = time.Duration(req.ForSeconds) * time.Second
	}
	if req.State == "" && req.Note == nil {
		return api.Presence{}, apierr.BadRequest("give a state (online, away, offline or auto), a note, or both")
	}
	if req.Note != nil {
		if err := proto.CheckPresenceNote(*req.Note); err != nil {
			return api.Presence{}, apierr.New(http.StatusBadRequest, "a short status on one line, like \"running tests on main\"", "note: %v", err)
		}
	}
	switch req.State {
	case "":
	case "auto":
		s.act.setOverride(0, time.Time{})
	default:
		st, err := proto.ParsePresenceState(req.State)
		if err != nil {
			return api.Presence{}, apierr.BadRequest("%v (or auto, to follow the agent's activity again)", err)
		}
		s.act.setOverride(st, now.Add(d))
	}
	if req.Note != nil {
		s.act.setNote(*req.Note, now.Add(d))
	}
	s.follow(now)
	return s.PresenceTable(), nil
}

// PresenceTable renders the presence table, ourselves included.
func (s *Announcer) PresenceTable() api.Presence {
	now := time.Now()
	out := api.Presence{TTLSeconds: s.cfg.PresenceTTL.Seconds(), Entries: []api.PresenceEntry{}}
	r := s.host.Roster()
	self := s.host.Self()
	for _, e := range s.table.All(now) {
		if _, ok := r.Member(e.Key); !ok {
			continue
		}
		out.Entries = append(out.Entries, api.PresenceEntry{
			Party:     s.host.Party(e.Key),
			State:     e.State.String(),
			Announced: e.Announced.String(),
			Seq:       e.Seq,
			LastHeard: e.LastHeard.UTC(),
			Self:      e.Key.Equal(self),
			Note:      e.Note,
		})
	}
	out.Agent = s.agentPresence(now)
	return out
}

// agentPresence renders our own derived presence.
func (s *Announcer) agentPresence(now time.Time) *api.AgentPresence {
	st := s.act.state(now)
	return &api.AgentPresence{State: st.State.String(), Source: st.Source, Reason: st.Reason, Waiting: st.Waiting,
		Note: st.Note, NoteUntil: st.NoteUntil.UTC(),
		LastSeen: st.LastSeen.UTC(), LastActive: st.LastActive.UTC(), Until: st.OverrideUntil.UTC(),
		AwayAfter: s.cfg.PresenceAwayAfter.Seconds(), OffAfter: s.cfg.PresenceOfflineAfter.Seconds()}
}

// ClientSeen records a call of a local client (any control API request).
func (s *Announcer) ClientSeen() { s.act.seen(time.Now()) }

// ClientWaiting records a local client that waits on the inbox (an event
// stream); end, called once, says it stopped.
func (s *Announcer) ClientWaiting() (end func()) { return s.act.beginWait(time.Now()) }

// Acted records a read, a send or an answer of a local client.
func (s *Announcer) Acted() { s.act.acted(time.Now()) }
