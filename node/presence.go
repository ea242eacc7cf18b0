package node

import (
	"time"

	"github.com/meshd/meshd/proto"
)

// presenceLoop refreshes our own presence every third of the TTL, so
// peers never see us silent, and ages out peers that went quiet.
func (n *Node) presenceLoop() {
	defer n.wg.Done()
	n.publishPresence(n.activity.state(time.Now()).State)
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
			n.publishPresence(n.activity.state(time.Now()).State)
		case <-n.activity.kick:
			n.followActivity(time.Now())
		case now := <-ct.C:
			n.followActivity(now)
			for _, k := range n.presence.Expire(now) {
				n.metrics.Inc("presence.expired")
				n.log.Info("peer offline: silent longer than presence ttl", "peer", k.Fingerprint(), "ttl", n.cfg.PresenceTTL)
			}
		}
	}
}

// followActivity announces the state the agent's activity gives, if it
// is not the one announced last.
func (n *Node) followActivity(now time.Time) {
	st := n.activity.state(now)
	if st.State == n.pub.Current().State {
		return
	}
	n.metrics.Inc("presence.changed." + st.State.String())
	n.log.Info("presence follows the agent", "state", st.State.String(), "source", st.Source, "why", st.Reason)
	n.publishPresence(st.State)
}

// presenceEnvelope signs an announcement of state.
func (n *Node) presenceEnvelope(state proto.PresenceState) (*proto.SignedEnvelope, error) {
	p := n.pub.Next(state, time.Now())
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

// publishPresence announces state to every linked peer and records it in
// our own table.
func (n *Node) publishPresence(state proto.PresenceState) {
	se, err := n.presenceEnvelope(state)
	if err != nil {
		n.log.Error("presence", "err", err)
		return
	}
	n.presence.Observe(n.id.Pub, *se.Presence, time.Now())
	links := n.linkList()
	for _, pl := range links {
		n.sendFrame(pl, proto.FrameEnvelope, se.Raw)
	}
	n.metrics.inc(cTxPresence)
}

// sendPresenceTo tells one new peer our current state.
func (n *Node) sendPresenceTo(pl *peerLink) {
	cur := n.pub.Current()
	if cur.State == 0 {
		return
	}
	se, err := n.presenceEnvelope(cur.State)
	if err != nil {
		return
	}
	n.sendFrame(pl, proto.FrameEnvelope, se.Raw)
}

// announceOffline says Offline to the given links (graceful shutdown).
func (n *Node) announceOffline(links []*peerLink) {
	if n.pub == nil {
		return
	}
	se, err := n.presenceEnvelope(proto.Offline)
	if err != nil {
		return
	}
	for _, pl := range links {
		n.sendFrame(pl, proto.FrameEnvelope, se.Raw)
	}
}
