package cards

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
)

// Dir is the home's folder of agent cards: one file per member, named by
// the hex of its key, holding the card's wire form.
const Dir = "cards"

// errCardStale: a card no newer than the one held.
var errCardStale = errors.New("card not newer than the one held")

// store holds the newest agent card of each signer, and keeps it in the
// home so that a restart keeps the cards.
type store struct {
	dir   string
	mu    sync.Mutex
	byKey map[proto.PubKey]*proto.Card // guarded by mu
	// last and pending pace the cards taken from peers (pace.go);
	// guarded by mu. Both hold only roster members' keys.
	last    map[proto.PubKey]time.Time
	pending map[proto.PubKey]pendingCard
	kick    chan struct{} // wakes Book.Run when a card is held back
}

func newStore(dir string) *store {
	return &store{dir: dir, byKey: map[proto.PubKey]*proto.Card{}, kick: make(chan struct{}, 1)}
}

func (b *store) path(k proto.PubKey) string {
	return filepath.Join(b.dir, hex.EncodeToString(k[:])+".card")
}

// load reads the cards in dir; a file that does not parse, verify or
// match its name is skipped and reported in bad.
func (b *store) load() (n int, bad []string, err error) {
	ents, err := os.ReadDir(b.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".card") || e.IsDir() {
			continue
		}
		raw, err := readCapped(filepath.Join(b.dir, e.Name()), proto.MaxCardSize)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		c, err := proto.ParseCard(raw)
		if err == nil {
			err = c.Verify()
		}
		if err == nil && filepath.Base(b.path(c.Key)) != e.Name() {
			err = fmt.Errorf("card of %s under another name", c.Key.Fingerprint())
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		b.byKey[c.Key] = c
		n++
	}
	return n, bad, nil
}

// readCapped reads a file of at most limit bytes.
func readCapped(path string, limit int) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > int64(limit) {
		return nil, fmt.Errorf("%d bytes: %w (limit %d)", fi.Size(), proto.ErrTooLarge, limit)
	}
	return os.ReadFile(path)
}

// get returns the card of k, or nil.
func (b *store) get(k proto.PubKey) *proto.Card {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byKey[k]
}

// version returns the version of the card held for k, or 0.
func (b *store) version(k proto.PubKey) uint64 {
	if c := b.get(k); c != nil {
		return c.Version
	}
	return 0
}

// all returns every card held.
func (b *store) all() []*proto.Card {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*proto.Card, 0, len(b.byKey))
	for _, c := range b.byKey {
		out = append(out, c)
	}
	return out
}

// put keeps c if it is newer than the card held for its signer, and
// writes it to the home. persistErr reports a failed write: the card is
// kept in memory all the same.
func (b *store) put(c *proto.Card) (persistErr error, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.byKey[c.Key]; old != nil && c.Version <= old.Version {
		return nil, fmt.Errorf("%w: version %d, held %d", errCardStale, c.Version, old.Version)
	}
	b.byKey[c.Key] = c
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return err, nil
	}
	return fsutil.WriteAtomic(b.path(c.Key), c.Raw, 0o600), nil
}
