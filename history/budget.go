package history

import (
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Per-sender budget record (bucket senders, key sender(32)):
//
//	bytes(8) | count(8)
//
// the wire bytes and the number of the sender's stored envelopes that
// are not channel Messages (DMs, Requests and Responses: the direct
// index). It is updated in the transaction that stores or deletes one,
// so it is exact and costs nothing to load at start.
const usageRecLen = 16

// Usage is what one sender's stored peer-addressed envelopes take.
type Usage struct {
	Bytes     uint64
	Envelopes uint64
}

type usage struct{ bytes, count uint64 }

func decodeUsage(v []byte) (usage, error) {
	if v == nil {
		return usage{}, nil
	}
	if len(v) != usageRecLen {
		return usage{}, fmt.Errorf("%w: sender budget record of %d bytes", ErrCorrupt, len(v))
	}
	return usage{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

// senderUsage reads from's usage; a damaged record reads as zero, and is
// rewritten whole by the next put.
func (w *wtx) senderUsage(from proto.PubKey) usage {
	u, _ := decodeUsage(w.senders().Get(from[:]))
	return u
}

func (w *wtx) putSenderUsage(from proto.PubKey, u usage) error {
	w.key = append(w.key[:0], from[:]...)
	if u.count == 0 {
		return w.senders().Delete(w.key)
	}
	v := w.value(usageRecLen)
	binary.BigEndian.PutUint64(v, u.bytes)
	binary.BigEndian.PutUint64(v[8:], u.count)
	return w.senders().Put(w.key, v)
}

// withinBudget reports whether a sender using u may store size more bytes.
func (s *Store) withinBudget(u usage, size int) bool {
	return u.count+1 <= uint64(s.cfg.MaxSenderEnvelopes) && u.bytes+uint64(size) <= uint64(s.cfg.MaxSenderBytes)
}

// releaseBudget gives the stored peer-addressed envelope ek's bytes back
// to its sender's budget. A missing envelope gives nothing back.
func (w *wtx) releaseBudget(ek [envKLen]byte) error {
	v := w.env().Get(ek[:])
	if v == nil {
		return nil
	}
	m, err := decodeEnv(uuid.UUID(ek[:idLen]), v)
	if err != nil {
		return err
	}
	u := w.senderUsage(m.From)
	u.bytes -= min(u.bytes, uint64(m.Size))
	u.count -= min(u.count, 1)
	return w.putSenderUsage(m.From, u)
}

// SenderUsage returns what from's stored DMs, Requests and Responses
// take against its budget (Config.MaxSenderBytes, MaxSenderEnvelopes).
func (s *Store) SenderUsage(from proto.PubKey) (Usage, error) {
	var u usage
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		u, err = decodeUsage(tx.Bucket(bucketSenders).Get(from[:]))
		return err
	})
	return Usage{Bytes: u.bytes, Envelopes: u.count}, err
}

// WithinBudget reports whether from may store a DM, Request or Response
// of size more bytes now. [Store.Deliver] decides; this lets a receiver
// refuse what Deliver would refuse before it spends a signature check.
func (s *Store) WithinBudget(from proto.PubKey, size int) (bool, error) {
	u, err := s.SenderUsage(from)
	if err != nil {
		return false, err
	}
	return s.withinBudget(usage{u.Bytes, u.Envelopes}, size), nil
}

// SenderUsages returns the usage of every sender holding any.
func (s *Store) SenderUsages() (map[proto.PubKey]Usage, error) {
	out := map[proto.PubKey]Usage{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSenders).ForEach(func(k, v []byte) error {
			u, err := decodeUsage(v)
			if err != nil || len(k) != keyLen {
				return fmt.Errorf("%w: sender budget entry of %d+%d bytes", ErrCorrupt, len(k), len(v))
			}
			out[proto.PubKey(k)] = Usage{Bytes: u.bytes, Envelopes: u.count}
			return nil
		})
	})
	return out, err
}
