package node

import (
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famPresenceChg = newFamily("meshd_presence_changes_total", "Changes of this node's own presence that its agent's activity (or presence set) caused, by the new state.", "state")
	// cPresenceChanged counts "presence.changed.<state>".
	cPresenceChanged = newPresenceVec("presence.changed.", famPresenceChg)

	famPresenceExp = newFamily("meshd_presence_expired_total", "Members shown offline after a silence longer than the presence TTL.")

	cPresenceExpired = newCounter("presence.expired", famPresenceExp)
)

// presenceLoop refreshes our own presence every third of the TTL, so
// peers never see us silent, and ages out peers that went quiet.
func (n *Node) presenceLoop() {
	defer n.wg.Done()
	n.refreshPresence()
	refresh := n.cfg.PresenceTTL / 3
	check := min(n.cfg.PresenceTTL/4, 2*time.Second)
	// Refreshes fall on multiples of the period on the clock, so that a
	// node receives its peers' refreshes together (see exchangeLoop).
	rt := time.NewTimer(alignedDelay(time.Now(), refresh))
	ct := time.NewTicker(check)
	defer rt.Stop()
	defer ct.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-rt.C:
			rt.Reset(alignedDelay(time.Now(), refresh))
			n.refreshPresence()
		case <-n.activity.kick:
			n.followActivity(time.Now())
		case now := <-ct.C:
			n.followActivity(now)
			for _, k := range n.presence.Expire(now) {
				n.metrics.inc(cPresenceExpired)
				n.log.Info("peer offline: silent longer than presence ttl", "peer", k.Fingerprint(), "ttl", n.cfg.PresenceTTL)
			}
		}
	}
}

// followActivity announces the state the agent's activity gives, if it
// is not the one announced last.
func (n *Node) followActivity(now time.Time) {
	n.activity.publishing.Lock()
	defer n.activity.publishing.Unlock()
	st := n.activity.state(now)
	if st.State == n.pub.Current().State && st.Note == n.activity.lastNote() {
		return
	}
	if st.State != n.pub.Current().State {
		n.metrics.inc(cPresenceChanged.of(st.State))
		n.log.Debug("presence follows the agent", "state", st.State.String(), "source", st.Source, "why", st.Reason)
	}
	n.publishState(st)
}

// refreshPresence announces the current state again.
func (n *Node) refreshPresence() {
	n.activity.publishing.Lock()
	defer n.activity.publishing.Unlock()
	n.publishState(n.activity.state(time.Now()))
}

// publishState announces st, with its note; the caller holds
// n.activity.publishing.
func (n *Node) publishState(st agentState) { n.publishPresenceNote(st.State, st.Note) }

// presenceEnvelope signs an announcement of state, with note.
func (n *Node) presenceEnvelope(state proto.PresenceState, note string) (*proto.SignedEnvelope, error) {
	p := n.pub.Next(state, time.Now())
	p.Note = note
	return n.sign(proto.ToOrg(n.Roster().Org), proto.KindPresence, presenceLifetime(n.cfg.PresenceTTL), func(e *proto.Envelope) {
		e.Presence = &p
	})
}

// presenceLifetime is the ttl_secs of our Presence envelopes: our
// presence_ttl, in whole seconds (rounded up, at least 1, at most the
// dedupe horizon), so receivers with a shorter presence_ttl wait as long
// as we do between refreshes (PROTOCOL.md §14.7).
func presenceLifetime(ttl time.Duration) time.Duration {
	secs := (ttl + time.Second - 1) / time.Second
	return min(max(secs, 1), maxTTL) * time.Second
}

// publishPresenceNote announces state, and note if any, to every linked
// peer and records it in our own table.
func (n *Node) publishPresenceNote(state proto.PresenceState, note string) {
	ses, err := n.presenceEnvelopes(state, note)
	if err != nil {
		n.log.Error("presence", "err", err)
		return
	}
	n.presence.Observe(n.id.Pub, *ses[len(ses)-1].Presence, time.Now())
	n.activity.published(note)
	for _, pl := range n.linkList() {
		n.sendPresenceFrames(pl, ses)
	}
	n.metrics.inc(cTxKind.of(proto.KindPresence))
}

// presenceEnvelopes signs the announcements of state (PROTOCOL.md §14.7):
// one without a note, which every node takes, and, when there is a note,
// one with it and the next seq, sent in a presence-note frame, which
// older nodes ignore and newer ones take in place of the first.
func (n *Node) presenceEnvelopes(state proto.PresenceState, note string) ([]*proto.SignedEnvelope, error) {
	se, err := n.presenceEnvelope(state, "")
	if err != nil || note == "" {
		return []*proto.SignedEnvelope{se}, err
	}
	noted, err := n.presenceEnvelope(state, note)
	if err != nil {
		return nil, err
	}
	return []*proto.SignedEnvelope{se, noted}, nil
}

func (n *Node) sendPresenceFrames(pl *peers.Link, ses []*proto.SignedEnvelope) {
	n.sendFrame(pl, proto.FrameEnvelope, ses[0].Raw)
	for _, se := range ses[1:] {
		n.sendFrame(pl, proto.FramePresenceNote, se.Raw)
	}
}

// sendPresenceTo tells one new peer our current state.
func (n *Node) sendPresenceTo(pl *peers.Link) {
	n.activity.publishing.Lock()
	defer n.activity.publishing.Unlock()
	cur := n.pub.Current()
	if cur.State == 0 {
		return
	}
	ses, err := n.presenceEnvelopes(cur.State, n.activity.lastNote())
	if err != nil {
		return
	}
	n.sendPresenceFrames(pl, ses)
}

// cFrameNoteNotPresence counts presence-note frames that held another kind.
var cFrameNoteNotPresence = newCounter("frame.presence_note_not_presence", famFrameInvalid, "presence_note_not_presence")

// receivePresenceNote takes a presence-note frame: one Presence envelope,
// through the receive pipeline like any; anything else is ignored.
func (n *Node) receivePresenceNote(pl *peers.Link, payload []byte) {
	se, err := proto.ParseEnvelope(payload)
	if err == nil && se.Kind != proto.KindPresence {
		n.metrics.inc(cFrameNoteNotPresence)
		n.logRL.debug(n.log, "presence-note frame without a presence", pl.Key.Fingerprint(), "frame.presence_note",
			"peer", pl.Key.Fingerprint(), "kind", se.Kind.String())
		return
	}
	n.receive(payload, rxSource{link: pl})
}

// announceOffline says Offline to the given links (graceful shutdown).
func (n *Node) announceOffline(links []*peers.Link) {
	if n.pub == nil {
		return
	}
	se, err := n.presenceEnvelope(proto.Offline, "")
	if err != nil {
		return
	}
	n.activity.published("")
	for _, pl := range links {
		n.sendFrame(pl, proto.FrameEnvelope, se.Raw)
	}
}

// presenceVec is one counter per presence state, "<prefix><state>".
type presenceVec [proto.Offline + 1]counter

func newPresenceVec(prefix string, f *Family) presenceVec {
	var v presenceVec
	for st := range v {
		v[st] = -1
		if st >= int(proto.Online) {
			name := proto.PresenceState(st).String()
			v[st] = newCounter(prefix+name, f, name)
		}
	}
	return v
}

// of returns the counter of state st, or -1 (counted nowhere) for a state
// this node does not know; its own presence is always one it knows.
func (v presenceVec) of(st proto.PresenceState) counter {
	if int(st) < len(v) {
		return v[st]
	}
	return -1
}
