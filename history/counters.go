package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Counter record (meta/counters):
//
//	epoch(16) | n(4) | n × (destination | last(8))

func encodeCounters(epoch uuid.UUID, last map[proto.Destination]uint64) []byte {
	b := append([]byte(nil), epoch[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(last)))
	for d, v := range last {
		b = appendDest(b, d)
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decodeCounters(b []byte) (uuid.UUID, map[proto.Destination]uint64, error) {
	var epoch uuid.UUID
	if len(b) < idLen+4 {
		return epoch, nil, errShort
	}
	copy(epoch[:], b)
	n := binary.BigEndian.Uint32(b[idLen:])
	b = b[idLen+4:]
	if uint64(n) > uint64(len(b)) {
		return epoch, nil, errShort
	}
	last := make(map[proto.Destination]uint64, n)
	for range n {
		d, rest, err := readDest(b)
		if err != nil {
			return epoch, nil, err
		}
		if len(rest) < 8 {
			return epoch, nil, errShort
		}
		last[d] = binary.BigEndian.Uint64(rest)
		b = rest[8:]
	}
	if len(b) != 0 || epoch == uuid.Nil {
		return epoch, nil, fmt.Errorf("%w: counter record", ErrCorrupt)
	}
	return epoch, last, nil
}

// SaveCounters durably records our own send counters: the epoch and, per
// destination, a number no lower than the last one used. It returns once
// the record is on disk.
func (s *Store) SaveCounters(epoch uuid.UUID, last map[proto.Destination]uint64) error {
	if epoch == uuid.Nil {
		return errors.New("save send counters: nil epoch")
	}
	rec := encodeCounters(epoch, last)
	return s.write(func(w *wtx) (error, error) {
		return nil, w.meta().Put(metaCounters, rec)
	}, nil)
}

// LoadCounters returns the saved send counters; ok is false when none were
// ever saved. A record that cannot be read yields an error wrapping
// [ErrCorrupt].
func (s *Store) LoadCounters() (epoch uuid.UUID, last map[proto.Destination]uint64, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(metaCounters)
		if v == nil {
			return nil
		}
		epoch, last, err = decodeCounters(v)
		ok = err == nil
		return err
	})
	return epoch, last, ok, err
}

// SendCounter hands out our own per-destination sequence numbers, from 1
// within an epoch, and makes them survive crashes: before it hands out
// a number it has durably reserved a block of Config.SeqReserve numbers
// above it. After a crash the counter resumes in the same epoch above
// every reserved number, so no number is ever used twice; receivers see a
// gap of at most SeqReserve-1. Only a store without counters (new, lost
// or unreadable) starts a new epoch. Safe for concurrent use.
type SendCounter struct {
	store   *Store
	reserve uint64
	epoch   uuid.UUID
	fresh   bool

	mu     sync.Mutex // guards last, ceil and closed; held across a reservation write
	last   map[proto.Destination]uint64
	ceil   map[proto.Destination]uint64
	closed bool
}

// OpenSendCounter loads the counters from s, or starts a new epoch (and
// saves it) when s has none or its record is corrupt.
func OpenSendCounter(s *Store) (*SendCounter, error) {
	epoch, last, ok, err := s.LoadCounters()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("load send counters: %w", err)
	}
	c := &SendCounter{store: s, reserve: s.cfg.SeqReserve}
	if !ok {
		if err != nil {
			s.log.Warn("send counters unreadable; starting a new epoch", "err", err)
		}
		epoch, last, c.fresh = proto.NewEpoch(), map[proto.Destination]uint64{}, true
		if err := s.SaveCounters(epoch, last); err != nil {
			return nil, fmt.Errorf("save new send epoch: %w", err)
		}
	}
	c.epoch = epoch
	c.last = last
	c.ceil = maps.Clone(last)
	return c, nil
}

// Epoch returns the sender epoch of every number this counter hands out.
func (c *SendCounter) Epoch() uuid.UUID { return c.epoch }

// Fresh reports whether OpenSendCounter had to start a new epoch.
func (c *SendCounter) Fresh() bool { return c.fresh }

// Next returns the next sequence number for d (the first is 1). When d's
// reserved block is used up it first reserves the next block durably,
// which costs one commit per Config.SeqReserve numbers.
func (c *SendCounter) Next(d proto.Destination) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	n := c.last[d] + 1
	if n > c.ceil[d] {
		ceil := maps.Clone(c.ceil)
		ceil[d] = c.last[d] + c.reserve
		if err := c.store.SaveCounters(c.epoch, ceil); err != nil {
			return 0, fmt.Errorf("reserve sequence numbers for %s: %w", d, err)
		}
		c.ceil = ceil
	}
	c.last[d] = n
	return n, nil
}

// Snapshot returns the last number handed out per destination.
func (c *SendCounter) Snapshot() map[proto.Destination]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.last)
}

// Close saves the exact last numbers, so a clean restart leaves no gap,
// and makes later Next calls fail. It is idempotent. Close it before the
// store.
func (c *SendCounter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if err := c.store.SaveCounters(c.epoch, c.last); err != nil {
		return fmt.Errorf("save send counters: %w", err)
	}
	c.ceil = maps.Clone(c.last)
	return nil
}
