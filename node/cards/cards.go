package cards

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Book keeps the members' cards: the store, its pacing, the card
// frames of peers and this node's own card. Create it with [New], run
// [Book.Run] for the held-back cards.
type Book struct {
	host  Host
	log   *slog.Logger
	store *store
	mu    sync.Mutex // serialises this node's card updates
}

// New loads the cards kept in dir (the home's [Dir]); a file that does
// not parse, verify or match its name is skipped, counted and logged.
func New(host Host, dir string, log *slog.Logger) *Book {
	s := &Book{host: host, log: log, store: newStore(dir)}
	count, bad, err := s.store.load()
	if err != nil {
		log.Warn("load agent cards", "err", err)
	}
	for _, f := range bad {
		host.Count(LoadFailed)
		log.Warn("agent card skipped", "file", f)
	}
	if count > 0 {
		log.Debug("agent cards loaded", "count", count)
	}
	return s
}

// Held returns the card held of k, or nil.
func (s *Book) Held(k proto.PubKey) *proto.Card { return s.store.get(k) }

// rejectReason names the class of a [proto.ParseCard] error.
func rejectReason(err error) Reason {
	switch {
	case errors.Is(err, proto.ErrTooLarge):
		return TooLarge
	case errors.Is(err, proto.ErrCardNotSelf):
		return NotSelf
	case errors.Is(err, proto.ErrNonCanonical):
		return NonCanonical
	case errors.Is(err, proto.ErrMalformed):
		return Malformed
	}
	return Invalid
}

// HandleFrame takes a card frame from pl: parse, membership, version,
// signature, pacing.
func (s *Book) HandleFrame(pl *peers.Link, payload []byte) {
	c, err := proto.ParseCard(payload)
	if err != nil {
		s.host.Refused(pl, rejectReason(err), err)
		return
	}
	if _, ok := s.host.Roster().Member(c.Key); !ok {
		s.host.Refused(pl, NotMember, fmt.Errorf("signer %s is not in the roster", c.Key.Fingerprint()))
		return
	}
	if held := s.store.version(c.Key); c.Version <= held {
		s.host.Refused(pl, Stale, fmt.Errorf("version %d, held %d", c.Version, held))
		return
	}
	if err := c.Verify(); err != nil {
		s.host.Refused(pl, BadSignature, err)
		return
	}
	if !s.store.pace(c, pl, time.Now()) {
		s.host.Count(Paced)
		return
	}
	s.accept(c, pl)
}

// accept applies a verified card from a peer.
func (s *Book) accept(c *proto.Card, pl *peers.Link) {
	if _, ok := s.host.Roster().Member(c.Key); !ok { // removed while it was held back
		s.host.Refused(pl, NotMember, fmt.Errorf("signer %s is not in the roster", c.Key.Fingerprint()))
		return
	}
	if c.Key.Equal(s.host.Self()) {
		// Our own card, newer than ours: a former run of this identity
		// (a restored home). Take its version, so our next card wins.
		s.log.Warn("peer holds a newer card of this node", "version", c.Version)
	}
	if err := s.apply(c, pl); err != nil {
		s.host.Refused(pl, Stale, err)
		return
	}
	s.store.applied(c.Key, time.Now())
}

// apply keeps c and sends it to every link but from.
func (s *Book) apply(c *proto.Card, from *peers.Link) error {
	perr, err := s.store.put(c)
	if err != nil {
		return err
	}
	if perr != nil {
		s.host.Count(PersistFailed)
		s.log.Error("persist agent card", "peer", c.Key.Fingerprint(), "err", perr)
	}
	s.host.Count(Accepted)
	s.log.Info("agent card", "peer", c.Key.Fingerprint(), "version", c.Version, "intents", len(c.Intents))
	for _, pl := range s.host.Links() {
		if pl != from {
			s.host.SendFrame(pl, proto.FrameCard, c.Raw)
		}
	}
	return nil
}

// SendAll sends pl every card held of a current member (a link came up).
func (s *Book) SendAll(pl *peers.Link) {
	r := s.host.Roster()
	for _, c := range s.store.all() {
		if _, ok := r.Member(c.Key); ok {
			s.host.SendFrame(pl, proto.FrameCard, c.Raw)
		}
	}
}
