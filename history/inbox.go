package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
	bolt "go.etcd.io/bbolt"
)

// Priority is an inbox item's priority (docs/AGENTS.md says what wakes
// an agent). ONLY APPEND: the numbers are stored.
type Priority uint8

const (
	PriorityHigh   Priority = 1
	PriorityNormal Priority = 2
	PriorityLow    Priority = 3
)

func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityNormal:
		return "normal"
	case PriorityLow:
		return "low"
	}
	return fmt.Sprintf("priority(%d)", uint8(p))
}

// MarshalText implements encoding.TextMarshaler for JSON output.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Inbox record (bucket inbox, key id(16) | sender(32), as the envelope's):
//
//	priority(1) | flags(1): bit0 read, bit1 wakes | delivered ms(8) | read ms(8)
//
// inbox-time indexes it by delivered ms(8) | id(16) | sender(32).
const inboxRecLen = 2 + 8 + 8

type inboxRec struct {
	priority  Priority
	read      bool
	wakes     bool
	delivered int64
	readAt    int64
}

func (r *inboxRec) encode() []byte { return r.put(make([]byte, inboxRecLen)) }

// put writes the record into b, which must be inboxRecLen bytes, and
// returns b.
func (r *inboxRec) put(b []byte) []byte {
	var flags byte
	if r.read {
		flags |= 1
	}
	if r.wakes {
		flags |= 2
	}
	b[0], b[1] = byte(r.priority), flags
	binary.BigEndian.PutUint64(b[2:], uint64(r.delivered))
	binary.BigEndian.PutUint64(b[10:], uint64(r.readAt))
	return b
}

func decodeInbox(b []byte) (inboxRec, error) {
	if len(b) != inboxRecLen {
		return inboxRec{}, fmt.Errorf("%w: inbox record of %d bytes", ErrCorrupt, len(b))
	}
	return inboxRec{
		priority:  Priority(b[0]),
		read:      b[1]&1 != 0,
		wakes:     b[1]&2 != 0,
		delivered: int64(binary.BigEndian.Uint64(b[2:])),
		readAt:    int64(binary.BigEndian.Uint64(b[10:])),
	}, nil
}

func inboxTimeKey(ms int64, ek [envKLen]byte) []byte {
	return appendInboxTimeKey(make([]byte, 0, tsLen+envKLen), ms, ek)
}

// appendInboxTimeKey appends inboxTimeKey(ms, ek) to dst.
func appendInboxTimeKey(dst []byte, ms int64, ek [envKLen]byte) []byte {
	return append(appendTS(dst, ms), ek[:]...)
}

// InboxItem is a delivered envelope's inbox state with its metadata.
type InboxItem struct {
	Meta
	Priority  Priority
	Wakes     bool
	Read      bool
	Delivered time.Time
	ReadAt    time.Time // zero while unread
}

// InboxFilter selects inbox items.
type InboxFilter struct {
	UnreadOnly bool
	// Since keeps items delivered at or after it; zero keeps all.
	Since time.Time
	// Limit keeps the newest Limit items; zero or less keeps all.
	Limit int
}

// SetInbox records that the stored envelope (from, id) was delivered to
// the inbox with priority p, and whether it wakes the agent. Setting it
// again updates priority and wakes and keeps the delivery time and read
// state. An envelope that is not stored fails with [ErrNotFound].
func (s *Store) SetInbox(from proto.PubKey, id uuid.UUID, p Priority, wakes bool) error {
	if p < PriorityHigh || p > PriorityLow {
		return fmt.Errorf("set inbox %s: unknown %s", id, p)
	}
	ek := envKey(id, from)
	return s.write(func(w *wtx) (error, error) {
		if w.env().Get(ek[:]) == nil {
			return fmt.Errorf("set inbox: envelope %s: %w", id, ErrNotFound), nil
		}
		return nil, w.setInbox(ek, p, wakes)
	}, nil)
}

// setInbox records inbox state for a stored envelope in the write tx.
func (w *wtx) setInbox(ek [envKLen]byte, p Priority, wakes bool) error {
	r := inboxRec{delivered: w.now.UnixMilli()}
	w.key = append(w.key[:0], ek[:]...)
	if v := w.inbox().Get(w.key); v != nil {
		old, err := decodeInbox(v)
		if err != nil {
			return err
		}
		r = old
	} else {
		w.key = appendInboxTimeKey(w.key[:0], r.delivered, ek)
		if err := w.inboxT().Put(w.key, present); err != nil {
			return err
		}
	}
	r.priority, r.wakes = p, wakes
	// Through w.key: ek[:] would move ek to the heap.
	w.key = append(w.key[:0], ek[:]...)
	return w.inbox().Put(w.key, r.put(w.value(inboxRecLen)))
}

// Delivery is one envelope for [Store.Deliver]: stored, and put in the
// inbox when Inbox is set.
type Delivery struct {
	Env         *proto.SignedEnvelope
	FromHistory bool
	Inbox       bool
	Priority    Priority
	Wakes       bool
}

// Deliver stores a batch of received envelopes and their inbox state in
// one write request, so a receiver that batches pays one commit for many
// deliveries. out[i] says what became of ds[i]: [Added], [Duplicate]
// (neither stored again nor put in the inbox) or [OverBudget] (a
// peer-addressed envelope past its sender's budget: not stored, and not
// remembered as seen). On error nothing was stored and out is nil.
func (s *Store) Deliver(ds []Delivery) (out []Outcome, err error) {
	for i, d := range ds {
		if err := checkEnvelope(d.Env); err != nil {
			return nil, fmt.Errorf("deliver envelope #%d: %w", i, err)
		}
		if d.Inbox && (d.Priority < PriorityHigh || d.Priority > PriorityLow) {
			return nil, fmt.Errorf("deliver envelope #%d: unknown %s", i, d.Priority)
		}
	}
	out = make([]Outcome, len(ds))
	apply := func(w *wtx) (error, error) {
		for i, d := range ds {
			o, err := w.putEnv(d.Env, d.FromHistory, true)
			if err != nil {
				return nil, err
			}
			out[i] = o
			if o == Added && d.Inbox {
				if err := w.setInbox(envKey(d.Env.ID, d.Env.From), d.Priority, d.Wakes); err != nil {
					return nil, err
				}
			}
		}
		return nil, nil
	}
	onCommit := func() {
		for i, d := range ds {
			switch out[i] {
			case Added, Duplicate:
				s.counted(d.Env, out[i] == Added)
			case OverBudget:
				s.st.overBudget.Add(1)
			}
		}
	}
	if err := s.submit(&request{apply: apply, onCommit: onCommit, envs: len(ds)}); err != nil {
		return nil, err
	}
	return out, nil
}

// MarkRead marks the inbox item (from, id) read. An envelope without
// inbox state fails with [ErrNotFound].
func (s *Store) MarkRead(from proto.PubKey, id uuid.UUID) error {
	ek := envKey(id, from)
	return s.write(func(w *wtx) (error, error) {
		v := w.inbox().Get(ek[:])
		if v == nil {
			return fmt.Errorf("mark read: inbox item %s: %w", id, ErrNotFound), nil
		}
		r, err := decodeInbox(v)
		if err != nil {
			return nil, err
		}
		if r.read {
			return nil, nil
		}
		r.read, r.readAt = true, w.now.UnixMilli()
		return nil, w.inbox().Put(ek[:], r.encode())
	}, nil)
}

// Inbox returns the inbox items that pass f, oldest first (newest last).
func (s *Store) Inbox(f InboxFilter) ([]InboxItem, error) {
	var out []InboxItem
	sinceMS := int64(-1 << 63)
	if !f.Since.IsZero() {
		sinceMS = f.Since.UnixMilli()
	}
	err := s.view(func(tx *bolt.Tx) error {
		inbox, env := tx.Bucket(bucketInbox), tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketInboxT).Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
			if len(k) != tsLen+envKLen {
				return fmt.Errorf("%w: inbox index key of %d bytes", ErrCorrupt, len(k))
			}
			if getTS(k) < sinceMS {
				break
			}
			ek := [envKLen]byte(k[tsLen:])
			r, err := decodeInbox(inbox.Get(ek[:]))
			if err != nil {
				return err
			}
			if f.UnreadOnly && r.read {
				continue
			}
			m, err := inboxEnv(env, ek)
			if err != nil {
				return err
			}
			m.Raw = nil
			out = append(out, InboxItem{
				Meta: m.Meta, Priority: r.priority, Wakes: r.wakes, Read: r.read,
				Delivered: timeOf(r.delivered), ReadAt: timeOf(r.readAt),
			})
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

// inboxEnv returns the stored envelope of the inbox item ek from the
// envelope bucket env; its Raw is valid only in the transaction.
func inboxEnv(env *bolt.Bucket, ek [envKLen]byte) (Stored, error) {
	id := uuid.UUID(ek[:idLen])
	v := env.Get(ek[:])
	if v == nil {
		return Stored{}, fmt.Errorf("%w: inbox item without envelope %s", ErrCorrupt, id)
	}
	return decodeEnv(id, v)
}

// deleteInbox removes ek's inbox state, if any.
func (w *wtx) deleteInbox(ek [envKLen]byte) error {
	v := w.inbox().Get(ek[:])
	if v == nil {
		return nil
	}
	r, err := decodeInbox(v)
	if err != nil {
		return err
	}
	if err := w.inboxT().Delete(inboxTimeKey(r.delivered, ek)); err != nil {
		return err
	}
	return w.inbox().Delete(ek[:])
}

// InboxEntry returns the inbox item (from, id), or an error wrapping
// [ErrNotFound].
func (s *Store) InboxEntry(from proto.PubKey, id uuid.UUID) (InboxItem, error) {
	var out InboxItem
	ek := envKey(id, from)
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketInbox).Get(ek[:])
		if v == nil {
			return fmt.Errorf("inbox item %s: %w", id, ErrNotFound)
		}
		var err error
		out, err = inboxItemOf(tx, ek, v)
		return err
	})
	return out, err
}

// ItemKey names an inbox item: its sender and envelope id.
type ItemKey struct {
	From proto.PubKey
	ID   uuid.UUID
}

// InboxRead reports which of the inbox items keys are marked read, in
// one read transaction: the mailbox mirror asks for a whole batch of
// files at once, not one transaction per file. An item not in the inbox
// is not read.
func (s *Store) InboxRead(keys []ItemKey) ([]bool, error) {
	read := make([]bool, len(keys))
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInbox)
		for i, k := range keys {
			ek := envKey(k.ID, k.From)
			v := b.Get(ek[:])
			if v == nil {
				continue
			}
			r, err := decodeInbox(v)
			if err != nil {
				return err
			}
			read[i] = r.read
		}
		return nil
	})
	return read, err
}

// InboxByID returns the inbox items whose envelope id is id, of any
// sender, in bytewise order of sender: usually one, none when no item
// has that id.
func (s *Store) InboxByID(id uuid.UUID) ([]InboxItem, error) {
	var out []InboxItem
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketInbox).Cursor()
		for k, v := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, v = c.Next() {
			if len(k) != envKLen {
				return fmt.Errorf("%w: inbox key of %d bytes", ErrCorrupt, len(k))
			}
			it, err := inboxItemOf(tx, [envKLen]byte(k), v)
			if err != nil {
				return err
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

func inboxItemOf(tx *bolt.Tx, ek [envKLen]byte, v []byte) (InboxItem, error) {
	r, err := decodeInbox(v)
	if err != nil {
		return InboxItem{}, err
	}
	m, err := inboxEnv(tx.Bucket(bucketEnv), ek)
	if err != nil {
		return InboxItem{}, err
	}
	return InboxItem{Meta: m.Meta, Priority: r.priority, Wakes: r.wakes, Read: r.read,
		Delivered: timeOf(r.delivered), ReadAt: timeOf(r.readAt)}, nil
}

// FindRequest returns the Request in the inbox whose request id (not its
// envelope id) is requestID, the newest if several; an error wrapping
// [ErrNotFound] if none. It reads the inbox newest first and parses only
// the envelopes of kind Request, so it is for the rare lookup that a
// cache missed (a request received before a restart), not a hot path.
func (s *Store) FindRequest(requestID uuid.UUID) (*proto.SignedEnvelope, error) {
	found, err := s.findRequests(requestID, 1)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("request %s: %w", requestID, ErrNotFound)
	}
	return found[0], nil
}

// FindRequests returns every Request in the inbox whose request id is
// requestID, newest first, at most max (all if max ≤ 0): request ids are
// chosen by senders, so two senders' requests may share one. Like
// [Store.FindRequest], it scans the inbox.
func (s *Store) FindRequests(requestID uuid.UUID, max int) ([]*proto.SignedEnvelope, error) {
	return s.findRequests(requestID, max)
}

func (s *Store) findRequests(requestID uuid.UUID, max int) ([]*proto.SignedEnvelope, error) {
	var found []*proto.SignedEnvelope
	err := s.view(func(tx *bolt.Tx) error {
		env := tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketInboxT).Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if len(k) != tsLen+envKLen {
				return fmt.Errorf("%w: inbox index key of %d bytes", ErrCorrupt, len(k))
			}
			st, err := inboxEnv(env, [envKLen]byte(k[tsLen:]))
			if err != nil {
				return err
			}
			if st.Kind != proto.KindRequest {
				continue
			}
			// Raw points into the mapped store, valid only in this
			// transaction: parse a copy.
			st.Raw = bytes.Clone(st.Raw)
			se, err := st.Envelope()
			if err != nil {
				return err
			}
			if se.Request != nil && se.Request.RequestID == requestID {
				found = append(found, se)
				if max > 0 && len(found) >= max {
					return nil
				}
			}
		}
		return nil
	})
	return found, err
}
