package node

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	famCardLoad     = newFamily("meshd_card_load_failures_total", "Agent card files in the home skipped at start.")
	famCardPaced    = newFamily("meshd_cards_held_back_total", "Agent cards that came within a second of their signer's last and were held back (the newest is taken when the second has passed).")
	famCardAccepted = newFamily("meshd_cards_accepted_total", "Agent cards accepted, this node's own included.")

	cCardLoadFailed    = newCounter("card.load_failed", famCardLoad)
	cCardPaced         = newCounter("card.paced", famCardPaced)
	cCardPersistFailed = newCounter("card.persist_failed", famPersistFailed, "card")
	cCardAccepted      = newCounter("card.accepted", famCardAccepted)
)

// Agent cards (docs/PROTOCOL.md §19): each member may publish one card
// saying what it serves. The node keeps the newest card of every member
// in a [cardBook], sends them all to a peer when a link comes up, and
// floods a newer card to every other link as it accepts it.

// Reasons a card frame is refused: counter "card.rejected.<reason>".
const (
	cardTooLarge     = "too_large"
	cardMalformed    = "malformed"
	cardNonCanonical = "non_canonical"
	cardInvalid      = "invalid"
	cardNotSelf      = "not_self"
	cardNotMember    = "not_member"
	cardStale        = "stale"
	cardBadSignature = "bad_signature"
)

// openCards loads the cards kept in the home.
func (n *Node) openCards() *cardBook {
	b := newCardBook(filepath.Join(n.cfg.Home, cardsDir))
	count, bad, err := b.load()
	if err != nil {
		n.log.Warn("load agent cards", "err", err)
	}
	for _, s := range bad {
		n.metrics.inc(cCardLoadFailed)
		n.log.Warn("agent card skipped", "file", s)
	}
	if count > 0 {
		n.log.Debug("agent cards loaded", "count", count)
	}
	return b
}

// cardRejectReason names the class of a [proto.ParseCard] error.
func cardRejectReason(err error) string {
	switch {
	case errors.Is(err, proto.ErrTooLarge):
		return cardTooLarge
	case errors.Is(err, proto.ErrCardNotSelf):
		return cardNotSelf
	case errors.Is(err, proto.ErrNonCanonical):
		return cardNonCanonical
	case errors.Is(err, proto.ErrMalformed):
		return cardMalformed
	}
	return cardInvalid
}

// rejectCard counts and logs (rate-limited, per peer) a refused card.
func (n *Node) rejectCard(pl *peers.Link, reason string, err error) {
	n.metrics.Inc("card.rejected." + reason)
	lvl := n.logRL.warn
	if reason == cardStale {
		lvl = n.logRL.debug // flooding brings every card back more than once
	}
	lvl(n.log, "agent card from peer refused", pl.Key.Fingerprint(), "card."+reason,
		"peer", pl.Key.Fingerprint(), "reason", reason, "err", err)
}

// handleCard takes a card frame: parse, membership, version, signature.
func (n *Node) handleCard(pl *peers.Link, payload []byte) {
	c, err := proto.ParseCard(payload)
	if err != nil {
		n.rejectCard(pl, cardRejectReason(err), err)
		return
	}
	if _, ok := n.Roster().Member(c.Key); !ok {
		n.rejectCard(pl, cardNotMember, fmt.Errorf("signer %s is not in the roster", c.Key.Fingerprint()))
		return
	}
	if held := n.cards.version(c.Key); c.Version <= held {
		n.rejectCard(pl, cardStale, fmt.Errorf("version %d, held %d", c.Version, held))
		return
	}
	if err := c.Verify(); err != nil {
		n.rejectCard(pl, cardBadSignature, err)
		return
	}
	if !n.cards.pace(c, pl, time.Now()) {
		n.metrics.inc(cCardPaced)
		return
	}
	n.acceptCard(c, pl)
}

// acceptCard applies a verified card from a peer.
func (n *Node) acceptCard(c *proto.Card, pl *peers.Link) {
	if _, ok := n.Roster().Member(c.Key); !ok { // removed while it was held back
		n.rejectCard(pl, cardNotMember, fmt.Errorf("signer %s is not in the roster", c.Key.Fingerprint()))
		return
	}
	if c.Key.Equal(n.id.Pub) {
		// Our own card, newer than ours: a former run of this identity
		// (a restored home). Take its version, so our next card wins.
		n.log.Warn("peer holds a newer card of this node", "version", c.Version)
	}
	if err := n.applyCard(c, pl); err != nil {
		n.rejectCard(pl, cardStale, err)
		return
	}
	n.cards.applied(c.Key, time.Now())
}

// applyCard keeps c and sends it to every link but from.
func (n *Node) applyCard(c *proto.Card, from *peers.Link) error {
	perr, err := n.cards.put(c)
	if err != nil {
		return err
	}
	if perr != nil {
		n.metrics.inc(cCardPersistFailed)
		n.log.Error("persist agent card", "peer", c.Key.Fingerprint(), "err", perr)
	}
	n.metrics.inc(cCardAccepted)
	n.log.Info("agent card", "peer", c.Key.Fingerprint(), "version", c.Version, "intents", len(c.Intents))
	for _, pl := range n.linkList() {
		if pl != from {
			n.sendFrame(pl, proto.FrameCard, c.Raw)
		}
	}
	return nil
}

// sendCardsTo sends pl every card held of a current member.
func (n *Node) sendCardsTo(pl *peers.Link) {
	r := n.Roster()
	for _, c := range n.cards.all() {
		if _, ok := r.Member(c.Key); ok {
			n.sendFrame(pl, proto.FrameCard, c.Raw)
		}
	}
}

// SetCard signs this node's card from in and publishes it.
func (n *Node) SetCard(in api.CardInput) (api.Card, error) {
	c := &proto.Card{Description: in.Description, Tags: in.Tags, Intents: make([]proto.CardIntent, 0, len(in.Intents))}
	for _, it := range in.Intents {
		ci := proto.CardIntent{Name: it.Name, Summary: it.Summary}
		if len(it.ParamsSchema) > 0 && string(it.ParamsSchema) != "null" {
			raw, err := proto.JSONToCBOR(it.ParamsSchema)
			if err != nil {
				return api.Card{}, badRequest("params_schema of intent %q: %w", it.Name, err)
			}
			ci.Params = raw
		}
		c.Intents = append(c.Intents, ci)
	}
	return n.publishCard(c)
}

// ClearCard publishes an empty card.
func (n *Node) ClearCard() (api.Card, error) {
	return n.publishCard(&proto.Card{})
}

// publishCard versions, signs, keeps and floods c. The version is the
// time in milliseconds, or one more than the held card's if that is
// later, so that a card made after a lost home still wins.
func (n *Node) publishCard(c *proto.Card) (api.Card, error) {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	c.Version = max(uint64(time.Now().UnixMilli()), n.cards.version(n.id.Pub)+1)
	if err := proto.SignCard(c, n.id.Key); err != nil {
		return api.Card{}, badRequest("%w", err)
	}
	if err := n.applyCard(c, nil); err != nil {
		return api.Card{}, err
	}
	return n.renderCard(c, time.Now()), nil
}

// CardOf returns the card of a member ("" is this node).
func (n *Node) CardOf(peer string) (api.Card, error) {
	k := n.id.Pub
	if peer != "" {
		m, err := n.resolvePeer(peer)
		if err != nil {
			return api.Card{}, err
		}
		k = m.Key
	}
	c := n.cards.get(k)
	if c == nil {
		hint := "a node publishes its card with: meshctl card set --file card.json"
		return api.Card{}, notFound(hint, "%s publishes no card", n.party(k).Fingerprint)
	}
	return n.renderCard(c, time.Now()), nil
}

// CardList lists the current members' cards that are not cleared (and,
// with intent set, that list it): online first, then away, then offline.
func (n *Node) CardList(intent string) api.Cards {
	now := time.Now()
	r := n.Roster()
	out := api.Cards{Cards: []api.Card{}}
	for _, c := range n.cards.all() {
		if _, ok := r.Member(c.Key); !ok || c.Empty() {
			continue
		}
		if intent != "" && !c.Serves(intent) {
			continue
		}
		out.Cards = append(out.Cards, n.renderCard(c, now))
	}
	rank := map[string]int{"online": 0, "away": 1}
	slices.SortFunc(out.Cards, func(a, b api.Card) int {
		ra, oka := rank[a.Presence]
		rb, okb := rank[b.Presence]
		if !oka {
			ra = 2
		}
		if !okb {
			rb = 2
		}
		return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	return out
}

// renderCard renders c with its signer's presence.
func (n *Node) renderCard(c *proto.Card, now time.Time) api.Card {
	out := api.Card{Party: n.party(c.Key), Version: c.Version, Description: c.Description,
		Intents: []api.CardIntent{}, Tags: append([]string{}, c.Tags...), Presence: "offline",
		Self: c.Key.Equal(n.id.Pub), Cleared: c.Empty()}
	if e, ok := n.presence.Get(c.Key, now); ok {
		out.Presence = e.State.String()
	}
	for _, it := range c.Intents {
		ci := api.CardIntent{Name: it.Name, Summary: it.Summary}
		if len(it.Params) > 0 {
			if js, err := proto.CBORToJSON(it.Params); err == nil {
				ci.ParamsSchema = json.RawMessage(js)
			}
		}
		out.Intents = append(out.Intents, ci)
	}
	return out
}
