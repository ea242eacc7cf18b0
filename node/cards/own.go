package cards

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/apierr"
	"github.com/meshd/meshd/proto"
)

// The methods the control API calls (node/control's CardBackend).

// SetCard signs this node's card from in and publishes it.
func (s *Book) SetCard(in api.CardInput) (api.Card, error) {
	c := &proto.Card{Description: in.Description, Tags: in.Tags, Intents: make([]proto.CardIntent, 0, len(in.Intents))}
	for _, it := range in.Intents {
		ci := proto.CardIntent{Name: it.Name, Summary: it.Summary}
		if len(it.ParamsSchema) > 0 && string(it.ParamsSchema) != "null" {
			raw, err := proto.JSONToCBOR(it.ParamsSchema)
			if err != nil {
				return api.Card{}, apierr.BadRequest("params_schema of intent %q: %w", it.Name, err)
			}
			ci.Params = raw
		}
		c.Intents = append(c.Intents, ci)
	}
	return s.publish(c)
}

// ClearCard publishes an empty card.
func (s *Book) ClearCard() (api.Card, error) {
	return s.publish(&proto.Card{})
}

// Carry publishes, under this node's key, the card it had published
// under prev (a key rotation: what it serves did not change with its
// key).
func (s *Book) Carry(prev proto.PubKey) {
	c := s.store.get(prev)
	if c == nil || c.Empty() {
		return
	}
	nc := &proto.Card{Description: c.Description, Intents: c.Intents, Tags: c.Tags}
	if _, err := s.publish(nc); err != nil {
		s.log.Warn("publish this node's card under its new key", "err", err,
			"fix", "publish it again: meshctl card set --file card.json")
		return
	}
	s.log.Info("published this node's card under its new key", "intents", len(nc.Intents))
}

// publish versions, signs, keeps and floods c. The version is the time
// in milliseconds, or one more than the held card's if that is later, so
// that a card made after a lost home still wins.
func (s *Book) publish(c *proto.Card) (api.Card, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Version = max(uint64(time.Now().UnixMilli()), s.store.version(s.host.Self())+1)
	if err := s.host.SignCard(c); err != nil {
		return api.Card{}, apierr.BadRequest("%w", err)
	}
	if err := s.apply(c, nil); err != nil {
		return api.Card{}, err
	}
	return s.render(c, time.Now()), nil
}

// CardOf returns the card of a member ("" is this node).
func (s *Book) CardOf(peer string) (api.Card, error) {
	k := s.host.Self()
	if peer != "" {
		var err error
		if k, err = s.host.ResolvePeer(peer); err != nil {
			return api.Card{}, err
		}
	}
	c := s.store.get(k)
	if c == nil {
		hint := "a node publishes its card with: meshctl card set --file card.json"
		return api.Card{}, apierr.NotFound(hint, "%s publishes no card", s.host.Party(k).Fingerprint)
	}
	return s.render(c, time.Now()), nil
}

// CardList lists the current members' cards that are not cleared (and,
// with intent set, that list it): online first, then away, then offline.
func (s *Book) CardList(intent string) api.Cards {
	now := time.Now()
	r := s.host.Roster()
	out := api.Cards{Cards: []api.Card{}}
	for _, c := range s.store.all() {
		if _, ok := r.Member(c.Key); !ok || c.Empty() {
			continue
		}
		if intent != "" && !c.Serves(intent) {
			continue
		}
		out.Cards = append(out.Cards, s.render(c, now))
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

// render renders c with its signer's presence.
func (s *Book) render(c *proto.Card, now time.Time) api.Card {
	out := api.Card{Party: s.host.Party(c.Key), Version: c.Version, Description: c.Description,
		Intents: []api.CardIntent{}, Tags: append([]string{}, c.Tags...), Presence: "offline",
		Self: c.Key.Equal(s.host.Self()), Cleared: c.Empty()}
	if st, ok := s.host.Presence(c.Key, now); ok {
		out.Presence = st.String()
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
