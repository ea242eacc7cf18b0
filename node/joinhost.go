package node

import (
	"github.com/meshd/meshd/node/join"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The counters of node/join.
var (
	famKnocks = newFamily("meshd_knocks_total", "Knocks to join another org (PROTOCOL.md §14.11): sent, unanswered, received, rosters sent to a knocking member, org confirmations and adoptions.", "event")

	// joinCounters maps each counter of node/join to its metric.
	joinCounters = [join.NumCounters]counter{
		join.InviteCreated:            newEvent("invite.created"),
		join.InviteRevoked:            newEvent("invite.revoked"),
		join.InviteUsed:               newEvent("invite.used"),
		join.InviteAwaitingSignatures: newEvent("invite.awaiting_signatures"),
		join.InviteClaimedNameRefused: newEvent("invite.claimed_name_refused"),
		join.KnockReceived:            newCounter("knock.received", famKnocks, "received"),
		join.KnockRosterSent:          newCounter("knock.roster_sent", famKnocks, "roster_sent"),
		join.KnockSent:                newCounter("knock.sent", famKnocks, "sent"),
		join.KnockUnanswered:          newCounter("knock.unanswered", famKnocks, "unanswered"),
		join.AdoptAdopted:             newCounter("adopt.adopted", famKnocks, "adopted"),
		join.AdoptConfirmed:           newCounter("adopt.confirmed", famKnocks, "confirmed"),
	}

	// joinReasons is the prefix of the counters of each refusal counted
	// by its reason, "<prefix><reason>".
	joinReasons = [join.NumReasonCounters]string{
		join.InviteRejected: "invite.rejected.",
		join.PendingRefused: "pending.refused.",
		join.AdoptRefused:   "adopt.refused.",
	}
)

// seedsFile holds, one a line, the addresses 'meshctl join' learnt from
// its token; the node dials them as static seeds, so a plain meshd links
// after joining.
const seedsFile = "seeds"

// joinHost is the node as node/join sees it.
type joinHost struct{ n *Node }

// newJoin makes the invites and the knock book of n.
func newJoin(n *Node) *join.Join {
	return join.New(joinHost{n}, join.Config{Home: n.cfg.Home, Logger: n.log, RateLog: n.logRL.l, Context: n.life.ctx})
}

func (h joinHost) Roster() *roster.Roster            { return h.n.Roster() }
func (h joinHost) Self() proto.PubKey                { return h.n.id.Pub }
func (h joinHost) SignRoster(r *roster.Roster) error { return r.Sign(h.n.id.Key) }
func (h joinHost) Advertised() []string              { return h.n.peers.Advertised() }
func (h joinHost) Pending() *peers.Pending           { return h.n.peers.Pending }
func (h joinHost) LinkConfig() transport.Config      { return h.n.peers.LinkConfig() }
func (h joinHost) Count(c join.Counter)              { h.n.metrics.inc(joinCounters[c]) }

func (h joinHost) CountReason(c join.ReasonCounter, reason string) {
	h.n.metrics.Inc(joinReasons[c] + reason)
}

func (h joinHost) ApplyRoster(r *roster.Roster) error {
	_, err := h.n.roster.Apply(r, nil)
	return err
}

// PeerAddrs returns the addresses known for the members in the peer
// table.
func (h joinHost) PeerAddrs() []string {
	p := h.n.peers
	p.Lock()
	defer p.Unlock()
	var out []string
	for _, pr := range p.ByKey {
		for _, a := range pr.Addrs.List() {
			out = append(out, a.String())
		}
	}
	return out
}

// Go runs f on a goroutine of the node's.
func (h joinHost) Go(f func()) {
	h.n.life.wg.Add(1)
	go func() {
		defer h.n.life.wg.Done()
		f()
	}()
}
