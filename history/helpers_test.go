package history

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// sender signs test envelopes with a deterministic key and numbers them
// per destination like a real node.
type sender struct {
	key   ed25519.PrivateKey
	pub   proto.PubKey
	epoch uuid.UUID
	seq   map[proto.Destination]uint64
	// randomIDs makes envelope ids random (v4) instead of time-ordered,
	// so nothing can lean on id order matching seq order.
	randomIDs bool
}

func newSender(tb testing.TB, name string) *sender {
	tb.Helper()
	seed := sha256.Sum256([]byte("history test sender " + name))
	key := ed25519.NewKeyFromSeed(seed[:])
	return &sender{key: key, pub: proto.PubKeyOf(key), epoch: proto.NewEpoch(), seq: map[proto.Destination]uint64{}}
}

// env signs an envelope to d with the next seq.
func (s *sender) env(tb testing.TB, d proto.Destination, ts int64, body string) *proto.SignedEnvelope {
	tb.Helper()
	s.seq[d]++
	return s.envSeq(tb, d, ts, s.seq[d], body)
}

// envSeq signs an envelope to d with an explicit seq.
func (s *sender) envSeq(tb testing.TB, d proto.Destination, ts int64, seq uint64, body string) *proto.SignedEnvelope {
	tb.Helper()
	id := proto.NewID()
	if s.randomIDs {
		id = uuid.New()
	}
	e := &proto.Envelope{
		ID:      id,
		From:    s.pub,
		To:      d,
		Kind:    proto.KindMessage,
		TS:      ts,
		TTL:     proto.DefaultTTL,
		Seq:     seq,
		Epoch:   s.epoch,
		Message: &proto.Message{Body: body},
	}
	se, err := proto.SignEnvelope(s.key, e)
	if err != nil {
		tb.Fatalf("sign envelope: %v", err)
	}
	return se
}

// msg signs a channel message with the next seq.
func (s *sender) msg(tb testing.TB, ch uuid.UUID, ts int64, body string) *proto.SignedEnvelope {
	tb.Helper()
	return s.env(tb, proto.ToChannel(ch), ts, body)
}

// testClock is a settable clock.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openTest(tb testing.TB, cfg Config) (*Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "history.db")
	return openAt(tb, path, cfg), path
}

func openAt(tb testing.TB, path string, cfg Config) *Store {
	tb.Helper()
	s, err := Open(path, cfg)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func mustPut(tb testing.TB, s *Store, ses ...*proto.SignedEnvelope) {
	tb.Helper()
	added, err := s.PutBatch(ses, false)
	if err != nil {
		tb.Fatalf("put: %v", err)
	}
	for i, a := range added {
		if !a {
			tb.Fatalf("put: envelope #%d not added", i)
		}
	}
}

func mustStats(tb testing.TB, s *Store) Stats {
	tb.Helper()
	st, err := s.Stats()
	if err != nil {
		tb.Fatalf("stats: %v", err)
	}
	return st
}

// checkDB runs bbolt's consistency check.
func checkDB(tb testing.TB, s *Store) {
	tb.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("bbolt check: %v", err)
	}
}

func body(n int) string { return strings.Repeat("x", n) }

func slicesSortMarks(m []proto.SeqMark) { slices.SortFunc(m, compareMarks) }

// getID returns the one stored envelope with id, whatever its sender.
func getID(s *Store, id uuid.UUID) (*Stored, error) {
	got, err := s.GetByID(id)
	if err != nil {
		return nil, err
	}
	if len(got) != 1 {
		return nil, fmt.Errorf("%d envelopes with id %s: %w", len(got), id, ErrNotFound)
	}
	return &got[0], nil
}
