package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Queue record (bucket queue, key peer(32) | qseq(8)):
//
//	expires ms(8) | id(16) | raw
//
// queue-id maps peer(32) | id(16) to qseq(8), for Ack and for dropping
// repeated enqueues; queue-count holds the entries per peer.

func queueKey(peer proto.PubKey, qseq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), peer[:]...), qseq)
}

func queueIDKey(peer proto.PubKey, id uuid.UUID) []byte {
	return append(append([]byte(nil), peer[:]...), id[:]...)
}

// Enqueue keeps se for peer until [Store.Ack], for DMs, Requests and
// Responses to a peer that is offline, and stores se as an envelope (as
// a received one is stored, under direct retention) so the sender can
// list what it said. It returns once se is durable. An
// envelope already queued for peer is not queued twice. A full queue
// refuses se with an error wrapping [ErrQueueFull].
func (s *Store) Enqueue(peer proto.PubKey, se *proto.SignedEnvelope) error {
	if err := checkEnvelope(se); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	rec := make([]byte, 0, 8+idLen+len(se.Raw))
	rec = binary.BigEndian.AppendUint64(rec, uint64(se.Expires().UnixMilli()))
	rec = append(rec, se.ID[:]...)
	rec = append(rec, se.Raw...)
	return s.write(func(w *wtx) (error, error) {
		ik := queueIDKey(peer, se.ID)
		if w.queueID().Get(ik) != nil {
			return nil, nil
		}
		if n := getU64(w.qcount().Get(peer[:])); n >= uint64(w.s.cfg.MaxQueuePerPeer) {
			return fmt.Errorf("%w: %d envelopes queued for %s", ErrQueueFull, n, peer.Fingerprint()), nil
		}
		qseq, err := w.queue().NextSequence()
		if err != nil {
			return nil, err
		}
		if err := w.queue().Put(queueKey(peer, qseq), rec); err != nil {
			return nil, err
		}
		if err := w.queueID().Put(ik, u64(qseq)); err != nil {
			return nil, err
		}
		r := DeliveryRecord{ID: se.ID, Peer: peer, Kind: se.Kind, State: DeliveryQueued,
			Sent: se.Time(), Expires: se.Expires(), At: w.now}
		if err := w.putDelivery(&r); err != nil {
			return nil, err
		}
		if err := w.putRequestOut(peer, se); err != nil {
			return nil, err
		}
		// Keep our own envelope as a received one is kept (direct
		// retention), so the sender can list what it said: the
		// conversation with a peer, its requests, its sent mirror.
		if _, err := w.putEnv(se, false, false); err != nil {
			return nil, err
		}
		return nil, w.addCount(w.qcount(), peer[:], 1)
	}, nil)
}

// Pending returns what is queued for peer, oldest first. Expired entries
// (ts + ttl before now) are removed instead, and counted in [Stats].
func (s *Store) Pending(peer proto.PubKey) ([]*proto.SignedEnvelope, error) {
	now := s.cfg.Now().UnixMilli()
	var raws [][]byte
	var expired []uuid.UUID
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQueue).Cursor()
		for k, v := c.Seek(peer[:]); k != nil && bytes.HasPrefix(k, peer[:]); k, v = c.Next() {
			if len(v) < 8+idLen {
				return fmt.Errorf("%w: queue record of %d bytes", ErrCorrupt, len(v))
			}
			if int64(binary.BigEndian.Uint64(v)) < now {
				expired = append(expired, uuid.UUID(v[8:8+idLen]))
				continue
			}
			raws = append(raws, bytes.Clone(v[8+idLen:]))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(expired) > 0 {
		if err := s.expire(peer, expired, now); err != nil {
			return nil, fmt.Errorf("drop expired queue entries: %w", err)
		}
		s.st.queueExpired.Add(uint64(len(expired)))
		s.log.Debug("dropped expired store-and-forward entries", "peer", peer.Fingerprint(), "n", len(expired))
	}
	out := make([]*proto.SignedEnvelope, 0, len(raws))
	for _, raw := range raws {
		se, err := proto.ParseEnvelope(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: queued envelope for %s: %w", ErrCorrupt, peer.Fingerprint(), err)
		}
		out = append(out, se)
	}
	return out, nil
}

// Ack removes the envelopes with ids from peer's queue, once the peer has
// them, and records them delivered. An id that names no queued envelope
// but one of our channel Messages counts peer as a reader that acked it.
// Other ids are ignored.
func (s *Store) Ack(peer proto.PubKey, ids ...uuid.UUID) error {
	_, err := s.ack(peer, ids)
	return err
}

// ack is [Store.Ack], and returns how many queue entries it removed:
// decided in the write, so two acks of one id racing (a peer that acks
// it on two links) remove and count it once.
func (s *Store) ack(peer proto.PubKey, ids []uuid.UUID) (removed int, err error) {
	if len(ids) == 0 {
		return 0, nil
	}
	err = s.write(func(w *wtx) (error, error) {
		removed = 0
		for _, id := range ids {
			ik := queueIDKey(peer, id)
			v := w.queueID().Get(ik)
			if v == nil {
				if err := w.ackChannel(id, peer); err != nil {
					return nil, err
				}
				continue
			}
			if err := w.dropQueued(peer, queueKey(peer, getU64(v)), id); err != nil {
				return nil, err
			}
			if _, _, err := w.setDelivery(id, peer, DeliveryDelivered, ""); err != nil {
				return nil, err
			}
			removed++
		}
		return nil, nil
	}, nil)
	return removed, err
}

// AckQueued is [Store.Ack] for the ids that name entries of peer's queue,
// which it finds in a read transaction first: an ack frame that names
// none (a reader acking channel Messages) costs no write. It returns how
// many entries it removed (an id listed twice, or acked meanwhile by
// another call, counts once), and the ids that named no entry, for
// [Store.CountReaderAcks].
func (s *Store) AckQueued(peer proto.PubKey, ids []uuid.UUID) (acked int, rest []uuid.UUID, err error) {
	var queued []uuid.UUID
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQueueID)
		seen := make(map[uuid.UUID]struct{}, len(ids))
		for _, id := range ids {
			if _, dup := seen[id]; dup {
				continue // listed twice: one acknowledgement
			}
			seen[id] = struct{}{}
			if b.Get(queueIDKey(peer, id)) != nil {
				queued = append(queued, id)
			} else {
				rest = append(rest, id)
			}
		}
		return nil
	})
	if err != nil || len(queued) == 0 {
		return 0, rest, err
	}
	acked, err = s.ack(peer, queued)
	return acked, rest, err
}

// CountReaderAcks counts, in one write, each reader's acks of channel
// Messages of ours (ids that name none are ignored), once per reader.
// The acks are taken per Message, so each record is read and rewritten
// once however many readers acked it.
func (s *Store) CountReaderAcks(acks map[proto.PubKey][]uuid.UUID) error {
	n := 0
	for _, ids := range acks {
		n += len(ids)
	}
	if n == 0 {
		return nil
	}
	type readerAck struct {
		id     uuid.UUID
		reader proto.PubKey
	}
	all := make([]readerAck, 0, n)
	for reader, ids := range acks {
		for _, id := range ids {
			all = append(all, readerAck{id, reader})
		}
	}
	slices.SortFunc(all, func(a, b readerAck) int { return bytes.Compare(a.id[:], b.id[:]) })
	readers := make([]proto.PubKey, 0, 16)
	return s.write(func(w *wtx) (error, error) {
		for i := 0; i < len(all); {
			j := i + 1
			for j < len(all) && all[j].id == all[i].id {
				j++
			}
			readers = readers[:0]
			for _, a := range all[i:j] {
				readers = append(readers, a.reader)
			}
			if err := w.ackChannel(all[i].id, readers...); err != nil {
				return nil, err
			}
			i = j
		}
		return nil, nil
	}, nil)
}

// expire drops peer's queue entries ids that expired before nowMS (a
// re-read: one acked meanwhile is gone), and tells the failure hook.
func (s *Store) expire(peer proto.PubKey, ids []uuid.UUID, nowMS int64) error {
	var failed []DeliveryRecord
	err := s.write(func(w *wtx) (error, error) {
		failed = failed[:0]
		for _, id := range ids {
			v := w.queueID().Get(queueIDKey(peer, id))
			if v == nil {
				continue
			}
			key := queueKey(peer, getU64(v))
			rec := w.queue().Get(key)
			if len(rec) < 8+idLen || int64(binary.BigEndian.Uint64(rec)) >= nowMS {
				continue
			}
			raw := bytes.Clone(rec[8+idLen:])
			if err := w.dropQueued(peer, key, id); err != nil {
				return nil, err
			}
			if err := w.failQueued(peer, id, raw, DeliveryExpired, "", &failed); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, nil)
	if err == nil {
		s.deliveryFailed(failed)
	}
	return err
}
