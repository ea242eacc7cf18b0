package node

import (
	"path/filepath"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/cards"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// The counters of node/cards.
var (
	famCardLoad     = newFamily("meshd_card_load_failures_total", "Agent card files in the home skipped at start.")
	famCardPaced    = newFamily("meshd_cards_held_back_total", "Agent cards that came within a second of their signer's last and were held back (the newest is taken when the second has passed).")
	famCardAccepted = newFamily("meshd_cards_accepted_total", "Agent cards accepted, this node's own included.")

	// cardCounters maps each counter of node/cards to its metric.
	cardCounters = [cards.NumCounters]counter{
		cards.LoadFailed:    newCounter("card.load_failed", famCardLoad),
		cards.Paced:         newCounter("card.paced", famCardPaced),
		cards.PersistFailed: newCounter("card.persist_failed", famPersistFailed, "card"),
		cards.Accepted:      newCounter("card.accepted", famCardAccepted),
	}
)

// cardsHost is the node as node/cards sees it.
type cardsHost struct{ n *Node }

// newCards loads the agent cards kept in the home.
func newCards(n *Node) *cards.Book {
	return cards.New(cardsHost{n}, filepath.Join(n.cfg.Home, cards.Dir), n.log)
}

func (h cardsHost) Roster() *roster.Roster         { return h.n.Roster() }
func (h cardsHost) Self() proto.PubKey             { return h.n.id.Pub }
func (h cardsHost) SignCard(c *proto.Card) error   { return proto.SignCard(c, h.n.id.Key) }
func (h cardsHost) Links() []*peers.Link           { return h.n.peers.Links() }
func (h cardsHost) Party(k proto.PubKey) api.Party { return h.n.party(k) }
func (h cardsHost) Count(c cards.Counter)          { h.n.metrics.inc(cardCounters[c]) }
func (h cardsHost) ResolvePeer(q string) (proto.PubKey, error) {
	m, err := h.n.resolvePeer(q)
	return m.Key, err
}

func (h cardsHost) SendFrame(pl *peers.Link, t proto.FrameType, payload []byte) {
	h.n.peers.Send(pl, t, payload)
}

func (h cardsHost) Presence(k proto.PubKey, now time.Time) (proto.PresenceState, bool) {
	e, ok := h.n.own.Table().Get(k, now)
	return e.State, ok
}

// Refused counts "card.rejected.<reason>" and logs the refusal, limited
// per peer and reason.
func (h cardsHost) Refused(pl *peers.Link, reason cards.Reason, err error) {
	n := h.n
	n.metrics.Inc("card.rejected." + string(reason))
	lvl := n.logRL.warn
	if reason == cards.Stale {
		lvl = n.logRL.debug // flooding brings every card back more than once
	}
	lvl(n.log, "agent card from peer refused", pl.Key.Fingerprint(), "card."+string(reason),
		"peer", pl.Key.Fingerprint(), "reason", string(reason), "err", err)
}
