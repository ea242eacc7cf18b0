package status

import (
	"slices"
	"strings"
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/control"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/presence"
	"github.com/meshd/meshd/proto"
)

// Reporter answers what the node reports of itself. Create it with [New].
type Reporter struct {
	host     Host
	cfg      Config
	store    *history.Store
	presence *presence.Table
}

// New returns a reporter of the node over its store and presence table.
func New(host Host, cfg Config, store *history.Store, pres *presence.Table) *Reporter {
	return &Reporter{host: host, cfg: cfg, store: store, presence: pres}
}

// listenAddrs returns the bound listen addresses.
func (s *Reporter) listenAddrs() []string {
	lns := s.host.Listeners()
	out := make([]string, 0, len(lns))
	for _, ln := range lns {
		out = append(out, ln.Addr().String())
	}
	return out
}

// StatusInfo returns this node's status: the same answer as GET /v1/status
// on the control socket.
func (s *Reporter) StatusInfo() api.Status {
	r := s.host.Roster()
	ll := s.host.Links()
	links := len(ll)
	byNet := map[string]int{}
	for _, pl := range ll {
		byNet[pl.Conn.Network()]++
	}
	adv := slices.Clone(s.host.Advertised())
	role := "none"
	m, member := r.Member(s.cfg.Self)
	if member {
		role = m.Role.String()
	}
	var seeds []string
	for _, s := range s.cfg.Seeds {
		seeds = append(seeds, s.String())
	}
	skew := s.host.Skew(time.Now())
	if skew.Abs() <= s.cfg.SkewWarn {
		skew = 0
	}
	var retry float64
	removed := !member && s.host.Former(s.cfg.Self)
	if removed {
		retry = peers.RemovedRetry.Seconds()
	}
	return api.Status{
		Removed:       removed,
		RetrySeconds:  retry,
		Key:           s.cfg.Self,
		Fingerprint:   s.cfg.Self.Fingerprint(),
		NodeID:        s.cfg.Self.NodeID().String(),
		Name:          s.cfg.Name,
		Role:          role,
		Org:           r.Org,
		RosterVersion: r.Version,
		RosterMembers: len(r.Members),
		Member:        member,
		Listen:        s.listenAddrs(),
		Advertised:    adv,
		Home:          s.cfg.Home,
		Started:       s.cfg.Started.UTC(),
		UptimeSeconds: time.Since(s.cfg.Started).Seconds(),
		Links:         links,
		LinksByNet:    byNet,
		MDNS:          s.host.Discovering(),
		Seeds:         seeds,
		Counters:      s.Counters(),

		ClockSkewSeconds: skew.Seconds(),
		Mailbox:          s.host.Mailbox(),
		QuotaRefused:     s.host.QuotaRefused(r),
		Blocked:          s.host.Blocked(),
	}
}

// RosterInfo returns the current roster, summarised as GET /v1/roster
// answers it.
func (s *Reporter) RosterInfo() api.Roster { return control.RosterSummary(s.host.Roster()) }

// maxLinkReport bounds the peers reported from one neighbour's peer list;
// a roster is rarely larger.
const maxLinkReport = 256

// LinkReports returns, for each currently linked peer that sent a peer
// list lately, the roster members it said it is linked to. Lists come
// with peer exchange (every PeerExchangeInterval and on link up), so this
// lags the mesh by up to that interval, and a peer's links to members
// without a listen address are never reported. Reports older than three
// intervals are left out.
func (s *Reporter) LinkReports() map[proto.PubKey][]proto.PubKey {
	var notBefore time.Time
	if iv := s.cfg.PeerExchangeInterval; iv > 0 {
		notBefore = time.Now().Add(-3 * iv)
	}
	r := s.host.Roster()
	out := map[proto.PubKey][]proto.PubKey{}
	for _, pl := range s.host.Links() {
		keys, ok := pl.PX.ViewKeys(pl.Key, notBefore, maxLinkReport)
		if !ok {
			continue
		}
		peers := keys[:0]
		for _, k := range keys {
			if _, ok := r.Member(k); ok {
				peers = append(peers, k)
			}
		}
		out[pl.Key] = peers
	}
	return out
}

// Counters returns the node's counters plus the listeners' handshake
// tallies ("handshake.accepted", "handshake.failed", and the
// unauthenticated connections shed: "handshake.shed.source_limit",
// "handshake.shed.idle", "handshake.shed.stalled", "handshake.shed.full",
// "handshake.first_message_timeout").
func (s *Reporter) Counters() map[string]uint64 {
	c := s.host.Counters()
	for _, ln := range s.host.Listeners() {
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
	if o := s.host.Outbox(); o != nil {
		st := o.Stats()
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
func (s *Reporter) PeerList() []api.Peer {
	r := s.host.Roster()
	links := s.host.Links()
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
			NameAmbiguous:  name != "" && !s.host.NameUnique(r, name),
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
