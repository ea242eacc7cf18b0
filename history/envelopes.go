package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Meta is what the store records about an envelope besides its bytes.
type Meta struct {
	ID    uuid.UUID
	From  proto.PubKey
	To    proto.Destination
	Kind  proto.Kind
	TS    int64 // Unix milliseconds, as on the wire
	TTL   uint32
	Seq   uint64
	Epoch uuid.UUID
	// Received is when this node stored the envelope.
	Received time.Time
	// FromHistory reports that it arrived through history sync.
	FromHistory bool
	// Size is the length of the wire form.
	Size int
}

// Time returns ts as a time.Time.
func (m *Meta) Time() time.Time { return time.UnixMilli(m.TS) }

// Stored is an envelope as kept in the store: its metadata and its
// complete wire form, as received. Forward Raw, never a re-encoding.
type Stored struct {
	Meta
	Raw []byte
}

// Envelope parses Raw. The signature was checked before the envelope was
// stored; call Verify again if the bytes come from an untrusted copy.
func (s *Stored) Envelope() (*proto.SignedEnvelope, error) {
	se, err := proto.ParseEnvelope(s.Raw)
	if err != nil {
		return nil, fmt.Errorf("%w: envelope %s: %w", ErrCorrupt, s.ID, err)
	}
	return se, nil
}

// Put stores se durably and returns once the batch holding it is on disk,
// so a caller may acknowledge delivery when Put returns. It reports
// added = false, and stores nothing, when (se.From, se.ID) was seen
// before. fromHistory marks envelopes that arrived through history sync.
//
// Put updates the dedupe set, the destination's index and the per-(sender,
// destination, epoch) sequence tracking in the same transaction. It does
// not apply the per-sender budget; [Store.Deliver] does.
func (s *Store) Put(se *proto.SignedEnvelope, fromHistory bool) (added bool, err error) {
	a, err := s.PutBatch([]*proto.SignedEnvelope{se}, fromHistory)
	if len(a) == 1 {
		added = a[0]
	}
	return added, err
}

// PutBatch stores several envelopes as one write request (a history page,
// say): all of them share one commit. added[i] reports whether ses[i] was
// new. Envelopes are keyed by (sender, id): another sender's envelope
// with the same id is another envelope. On error nothing was stored and
// added is nil.
func (s *Store) PutBatch(ses []*proto.SignedEnvelope, fromHistory bool) (added []bool, err error) {
	for i, se := range ses {
		if err := checkEnvelope(se); err != nil {
			return nil, fmt.Errorf("put envelope #%d: %w", i, err)
		}
	}
	added = make([]bool, len(ses))
	apply := func(w *wtx) (error, error) {
		for i, se := range ses {
			out, err := w.putEnv(se, fromHistory, false)
			if err != nil {
				return nil, err
			}
			added[i] = out == Added
		}
		return nil, nil
	}
	onCommit := func() {
		for i, se := range ses {
			s.counted(se, added[i])
		}
	}
	if err := s.submit(&request{apply: apply, onCommit: onCommit, envs: len(ses)}); err != nil {
		return nil, err
	}
	return added, nil
}

// counted updates the statistics and the seen cache for a committed put.
func (s *Store) counted(se *proto.SignedEnvelope, added bool) {
	if added {
		s.st.envelopes.Add(1)
		s.seen.add(seenKey(se.From, se.ID))
	} else {
		s.st.duplicates.Add(1)
	}
}

func checkEnvelope(se *proto.SignedEnvelope) error {
	switch {
	case se == nil:
		return errors.New("nil envelope")
	case len(se.Raw) == 0:
		return fmt.Errorf("envelope %s has no wire bytes", se.ID)
	case len(se.Raw) > proto.MaxEnvelopeSize:
		return fmt.Errorf("envelope %s of %d bytes: %w", se.ID, len(se.Raw), proto.ErrTooLarge)
	case se.ID == uuid.Nil:
		return errors.New("envelope with nil id")
	}
	return nil
}

// Outcome is what became of one envelope handed to [Store.Deliver].
type Outcome uint8

const (
	// Added: stored (and put in the inbox if asked).
	Added Outcome = iota + 1
	// Duplicate: its (sender, id) was stored or seen before; nothing
	// changed.
	Duplicate
	// OverBudget: a peer-addressed envelope refused because its sender's
	// stored peer-addressed envelopes would pass Config.MaxSenderBytes or
	// Config.MaxSenderEnvelopes. Nothing was stored and no dedupe entry
	// was made, so a later copy is judged afresh.
	OverBudget
)

func (o Outcome) String() string {
	switch o {
	case Added:
		return "added"
	case Duplicate:
		return "duplicate"
	case OverBudget:
		return "over_budget"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// putEnv stores one envelope unless it is a duplicate or, with budget
// set, a peer-addressed envelope past its sender's budget.
func (w *wtx) putEnv(se *proto.SignedEnvelope, fromHistory, budget bool) (Outcome, error) {
	sk := seenKey(se.From, se.ID)
	if w.seen().Get(sk[:]) != nil {
		return Duplicate, nil
	}
	w.key = appendEnvKey(w.key[:0], se.ID, se.From)
	if w.env().Get(w.key) != nil {
		// Stored, but its seen entry was pruned (archive retention can
		// outlive SeenMaxAge).
		return Duplicate, w.putSeen(sk, se.TS)
	}
	direct := se.To.Kind != proto.DestChannel
	if direct {
		u := w.senderUsage(se.From)
		if budget && !w.s.withinBudget(u, len(se.Raw)) {
			return OverBudget, nil
		}
		u.bytes += uint64(len(se.Raw))
		u.count++
		if err := w.putSenderUsage(se.From, u); err != nil {
			return 0, err
		}
	}
	w.key = appendEnvKey(w.key[:0], se.ID, se.From)
	if err := w.env().Put(w.key, encodeEnv(se, w.now.UnixMilli(), fromHistory)); err != nil {
		return 0, err
	}
	var err error
	if !direct {
		l := w.value(4)
		binary.BigEndian.PutUint32(l, uint32(len(se.Raw)))
		w.key = appendChanKey(w.key[:0], se.To.Channel, se.TS, se.From, se.Epoch, se.Seq, se.ID)
		err = w.chanIdx().Put(w.key, l)
	} else {
		w.key = appendDirectKey(w.key[:0], se.TS, se.ID, se.From)
		err = w.dirIdx().Put(w.key, present)
	}
	if err != nil {
		return 0, err
	}
	if err := w.addCount(w.counts(), countKey(&se.To), 1); err != nil {
		return 0, err
	}
	if err := w.putSeen(sk, se.TS); err != nil {
		return 0, err
	}
	if err := w.observeSeq(se.To, se.From, se.Epoch, se.Seq); err != nil {
		return 0, err
	}
	return Added, nil
}

func (w *wtx) putSeen(sk [seenKLen]byte, ts int64) error {
	v := w.value(8)
	binary.BigEndian.PutUint64(v, uint64(ts))
	// Through w.key: sk[:] would move sk to the heap.
	w.key = append(w.key[:0], sk[:]...)
	if err := w.seen().Put(w.key, v); err != nil {
		return err
	}
	w.key = appendSeenAgeKey(w.key[:0], ts, sk)
	return w.seenAge().Put(w.key, present)
}

// deleteEnv removes an envelope, its index entry and its inbox state, and
// gives a peer-addressed one's bytes back to its sender's budget. Its
// dedupe entry stays until PruneSeen.
func (w *wtx) deleteEnv(m *Stored) error {
	ek := envKey(m.ID, m.From)
	var err error
	if m.To.Kind == proto.DestChannel {
		err = w.chanIdx().Delete(chanKey(m.To.Channel, m.TS, m.From, m.Epoch, m.Seq, m.ID))
	} else {
		err = w.dirIdx().Delete(directKey(m.TS, m.ID, m.From))
		if err == nil {
			err = w.releaseBudget(ek)
		}
	}
	if err != nil {
		return err
	}
	if err := w.env().Delete(ek[:]); err != nil {
		return err
	}
	if err := w.addCount(w.counts(), countKey(&m.To), -1); err != nil {
		return err
	}
	return w.deleteInbox(ek)
}

// Get returns the envelope (from, id), or an error wrapping [ErrNotFound].
func (s *Store) Get(from proto.PubKey, id uuid.UUID) (*Stored, error) {
	var out *Stored
	ek := envKey(id, from)
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEnv).Get(ek[:])
		if v == nil {
			return fmt.Errorf("envelope %s from %s: %w", id, from.Fingerprint(), ErrNotFound)
		}
		m, err := decodeEnv(id, v)
		if err != nil {
			return err
		}
		m.Raw = bytes.Clone(m.Raw)
		out = &m
		return nil
	})
	return out, err
}

// GetByID returns every stored envelope with id, of any sender, in
// bytewise order of sender: usually one, and none (with no error) when
// the id is not stored.
func (s *Store) GetByID(id uuid.UUID) ([]Stored, error) {
	var out []Stored
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEnv).Cursor()
		for k, v := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, v = c.Next() {
			if len(k) != envKLen {
				return fmt.Errorf("%w: envelope key of %d bytes", ErrCorrupt, len(k))
			}
			m, err := decodeEnv(id, v)
			if err != nil {
				return err
			}
			m.Raw = bytes.Clone(m.Raw)
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// Seen reports whether (from, id) was stored before, even if the envelope
// has since been pruned (see [Store.PruneSeen]). Recent keys are answered
// from memory; the rest cost one B-tree lookup. Use it to drop duplicates
// before verifying signatures; [Store.Put] makes the final decision.
func (s *Store) Seen(from proto.PubKey, id uuid.UUID) (bool, error) {
	sk := seenKey(from, id)
	if s.seen.has(sk) {
		s.st.cacheHits.Add(1)
		return true, nil
	}
	s.st.cacheMisses.Add(1)
	var found bool
	err := s.view(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketSeen).Get(sk[:]) != nil
		return nil
	})
	if err != nil {
		return false, err
	}
	if found {
		s.seen.add(sk)
	}
	return found, nil
}

// ChannelMessages returns the newest limit envelopes of channel with ts at
// or after since (zero: no bound), oldest first. limit <= 0 means all.
// It serves `meshctl history`.
func (s *Store) ChannelMessages(channel uuid.UUID, since time.Time, limit int) ([]Stored, error) {
	var out []Stored
	sinceMS := int64(-1 << 63)
	if !since.IsZero() {
		sinceMS = since.UnixMilli()
	}
	err := s.view(func(tx *bolt.Tx) error {
		env := tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketChanIdx).Cursor()
		for k, _ := seekLast(c, channel[:]); k != nil; k, _ = c.Prev() {
			if !bytes.HasPrefix(k, channel[:]) || len(k) != chanKeyLen {
				break
			}
			e := parseChanKey(k)
			if e.ts < sinceMS || (limit > 0 && len(out) >= limit) {
				break
			}
			v := env.Get(e.envKey())
			if v == nil {
				return fmt.Errorf("%w: index entry without envelope %s", ErrCorrupt, e.id)
			}
			m, err := decodeEnv(e.id, v)
			if err != nil {
				return err
			}
			m.Raw = bytes.Clone(m.Raw)
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// seekLast positions c on the last key with prefix, or on the key before
// it when there is none (callers check the prefix).
func seekLast(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	bound := append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, chanKeyLen)...)
	if k, _ := c.Seek(bound); k == nil {
		return c.Last()
	}
	return c.Prev()
}
