package node

import (
	"net/http"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// SetPresence holds our presence at req.State for req.ForSeconds (the
// default override when 0), instead of what the agent's activity gives;
// state "auto" ends an override. It announces the result at once and
// returns the presence table.
func (n *Node) SetPresence(req api.SetPresence) (api.Presence, error) {
	if req.ForSeconds < 0 || time.Duration(req.ForSeconds)*time.Second > MaxPresenceOverride {
		return api.Presence{}, badRequest("for_seconds %d: want 0 (the default, %v) to %d", req.ForSeconds,
			DefaultPresenceOverride, int(MaxPresenceOverride/time.Second))
	}
	now := time.Now()
	d := DefaultPresenceOverride
	if req.ForSeconds > 0 {
		d = time.Duration(req.ForSeconds) * time.Second
	}
	if req.State == "" && req.Note == nil {
		return api.Presence{}, badRequest("give a state (online, away, offline or auto), a note, or both")
	}
	if req.Note != nil {
		if err := proto.CheckPresenceNote(*req.Note); err != nil {
			return api.Presence{}, refuse(http.StatusBadRequest, "a short status on one line, like \"running tests on main\"", "note: %v", err)
		}
	}
	switch req.State {
	case "":
	case "auto":
		n.activity.setOverride(0, time.Time{})
	default:
		st, err := proto.ParsePresenceState(req.State)
		if err != nil {
			return api.Presence{}, badRequest("%v (or auto, to follow the agent's activity again)", err)
		}
		n.activity.setOverride(st, now.Add(d))
	}
	if req.Note != nil {
		n.activity.setNote(*req.Note, now.Add(d))
	}
	n.followActivity(now)
	return n.PresenceTable(), nil
}

// agentPresence renders our own derived presence.
func (n *Node) agentPresence(now time.Time) *api.AgentPresence {
	st := n.activity.state(now)
	return &api.AgentPresence{State: st.State.String(), Source: st.Source, Reason: st.Reason, Waiting: st.Waiting,
		Note: st.Note, NoteUntil: st.NoteUntil.UTC(),
		LastSeen: st.LastSeen.UTC(), LastActive: st.LastActive.UTC(), Until: st.OverrideUntil.UTC(),
		AwayAfter: n.cfg.PresenceAwayAfter.Seconds(), OffAfter: n.cfg.PresenceOfflineAfter.Seconds()}
}

// ClientSeen records a call of a local client (any control API request).
func (n *Node) ClientSeen() { n.activity.seen(time.Now()) }

// ClientWaiting records a local client that waits on the inbox (an event
// stream); end, called once, says it stopped.
func (n *Node) ClientWaiting() (end func()) { return n.activity.beginWait(time.Now()) }

// clientActed records a read, a send or an answer of a local client.
func (n *Node) clientActed() { n.activity.acted(time.Now()) }
