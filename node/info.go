package node

import (
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/node/api"
)

// The node's answers to the control API (package node/control), with
// plain arguments and API types.

// Counters returns the node's counters plus the listeners' handshake
// tallies ("handshake.accepted", "handshake.failed", and the
// unauthenticated connections shed: "handshake.shed.source_limit",
// "handshake.shed.idle", "handshake.shed.stalled", "handshake.shed.full",
// "handshake.first_message_timeout").
func (n *Node) Counters() map[string]uint64 {
	c := n.metrics.Snapshot()
	n.addLinkStats(c)
	for _, ln := range n.listeners {
		st := ln.Stats()
		if st.Accepted > 0 {
			c["handshake.accepted"] += st.Accepted
		}
		for k, v := range map[string]uint64{"handshake.failed": st.Failed,
			"handshake.shed.source_limit": st.ShedSourceLimit, "handshake.shed.idle": st.ShedIdle,
			"handshake.shed.stalled": st.ShedStalled, "handshake.shed.full": st.ShedFull, "handshake.first_message_timeout": st.FirstMessageTimeout} {
			if v > 0 {
				c[k] += v
			}
		}
	}
	if n.outbox != nil {
		st := n.outbox.Stats()
		for k, v := range map[string]uint64{"outbox.picked": st.Picked, "outbox.recovered": st.Recovered,
			"outbox.files_sent": st.Sent, "outbox.files_failed": st.Failed, "outbox.malformed": st.Malformed} {
			if v > 0 {
				c[k] = v
			}
		}
		for r, v := range st.FailedByReason {
			c["outbox.failed."+r] = v
		}
		if st.ScanOnly {
			c["outbox.scan_only"] = 1
		}
	}
	return c
}

// PeerList returns the linked peers, sorted by name then key.
func (n *Node) PeerList() []api.Peer {
	r := n.Roster()
	links := n.linkList()
	out := make([]api.Peer, 0, len(links))
	for _, pl := range links {
		role := "none"
		if m, ok := r.Member(pl.Key); ok {
			role = m.Role.String()
		}
		// The name is the roster's only: the one the peer claims in its
		// handshake is shown apart, so it cannot pass for a member's.
		var name, claimed string
		if m, ok := r.Member(pl.Key); ok {
			name = m.Name
		}
		if pl.Payload.Name != name {
			claimed = pl.Payload.Name
		}
		dir := "inbound"
		if pl.Conn.Outbound() {
			dir = "outbound"
		}
		est := pl.Conn.Established()
		out = append(out, api.Peer{
			Key:            pl.Key,
			Fingerprint:    pl.Key.Fingerprint(),
			Name:           name,
			ClaimedName:    claimed,
			NameAmbiguous:  name != "" && !n.names.of(r).Unique(name),
			Role:           role,
			Address:        pl.Conn.RemoteAddr(),
			Network:        pl.Conn.Network(),
			Direction:      dir,
			Established:    est.UTC(),
			LinkAgeSeconds: time.Since(est).Seconds(),
			LastSeen:       pl.Conn.LastRecv().UTC(),
			RosterVersion:  pl.Payload.RosterVersion,
			Listen:         pl.ListenAddrs(),
		})
	}
	slices.SortFunc(out, func(a, b api.Peer) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return out
}
