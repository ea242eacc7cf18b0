package node

import (
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/ownpresence"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters of node/ownpresence.
var (
	famPresenceChg = newFamily("meshd_presence_changes_total", "Changes of this node's own presence that its agent's activity (or presence set) caused, by the new state.", "state")
	// cPresenceChanged counts "presence.changed.<state>".
	cPresenceChanged = newPresenceVec("presence.changed.", famPresenceChg)

	famPresenceExp = newFamily("meshd_presence_expired_total", "Members shown offline after a silence longer than the presence TTL.")

	// ownPresenceCounters maps each counter of node/ownpresence to its
	// metric.
	ownPresenceCounters = [ownpresence.NumCounters]counter{
		ownpresence.Expired: newCounter("presence.expired", famPresenceExp),
		ownpresence.Sent:    cTxKind.of(proto.KindPresence),
	}
)

// ownPresenceHost is the node as node/ownpresence sees it.
type ownPresenceHost struct{ n *Node }

// newOwnPresence starts following the agent's activity, over the
// presence table.
func newOwnPresence(n *Node) *ownpresence.Announcer {
	cfg := ownpresence.Config{PresenceTTL: n.cfg.PresenceTTL, PresenceAwayAfter: n.cfg.PresenceAwayAfter,
		PresenceOfflineAfter: n.cfg.PresenceOfflineAfter, MaxTTL: rx.MaxTTL * time.Second}
	return ownpresence.New(ownPresenceHost{n}, cfg, presence.NewTable(n.cfg.PresenceTTL), n.log)
}

func (h ownPresenceHost) Roster() *roster.Roster         { return h.n.Roster() }
func (h ownPresenceHost) Self() proto.PubKey             { return h.n.id.Pub }
func (h ownPresenceHost) Links() []*peers.Link           { return h.n.peers.Links() }
func (h ownPresenceHost) Party(k proto.PubKey) api.Party { return h.n.party(k) }
func (h ownPresenceHost) Count(c ownpresence.Counter)    { h.n.metrics.inc(ownPresenceCounters[c]) }
func (h ownPresenceHost) Changed(st proto.PresenceState) { h.n.metrics.inc(cPresenceChanged.of(st)) }

func (h ownPresenceHost) Sign(to proto.Destination, kind proto.Kind, ttl time.Duration, fill func(*proto.Envelope)) (*proto.SignedEnvelope, error) {
	return h.n.out.Sign(to, kind, ttl, fill)
}

func (h ownPresenceHost) SendFrame(pl *peers.Link, t proto.FrameType, payload []byte) {
	h.n.peers.Send(pl, t, payload)
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
	n.rx.Receive(payload, rx.Source{Link: pl})
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
