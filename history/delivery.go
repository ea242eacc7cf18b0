package history

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Delivery records: what became of each envelope this node sent (docs
// PROTOCOL §16.6). One record per (id, recipient) of a DM, Request or
// Response, written in the transaction that queues it and updated in the
// one that acks, expires or refuses it; one per channel Message, keyed
// with the zero key as recipient, counting the readers that acked it.
//
// Bucket delivery, key id(16) | peer(32):
//
//	kind(1) | state(1) | channel flag(1) | sent ms(8) | expires ms(8) |
//	at ms(8) | readers(4) | acked(4) | channel id(16) | reason
//
// delivery-time indexes it by putTS(sent ms)(8) | id(16) | peer(32), for
// listing newest first and pruning oldest first; delivery-acks holds
// id(16) | reader(32) for each reader that acked a channel Message.
const deliveryRecLen = 3 + 8 + 8 + 8 + 4 + 4 + idLen

// MaxReasonLen bounds the reason stored with a refused delivery.
const MaxReasonLen = 256

// DeliveryState is what became of a sent envelope at one recipient.
// ONLY APPEND: the numbers are stored.
type DeliveryState uint8

const (
	// DeliveryQueued: kept and re-sent, not yet acknowledged.
	DeliveryQueued DeliveryState = 1
	// DeliveryDelivered: the recipient acknowledged it (stored durably).
	DeliveryDelivered DeliveryState = 2
	// DeliveryExpired: it expired unacknowledged and is no longer sent.
	DeliveryExpired DeliveryState = 3
	// DeliveryRefused: this node gave it up before it expired.
	DeliveryRefused DeliveryState = 4
	// DeliverySent: a channel Message, sent once to the linked readers.
	DeliverySent DeliveryState = 5
)

func (d DeliveryState) String() string {
	switch d {
	case DeliveryQueued:
		return "queued"
	case DeliveryDelivered:
		return "delivered"
	case DeliveryExpired:
		return "expired"
	case DeliveryRefused:
		return "refused"
	case DeliverySent:
		return "sent"
	}
	return fmt.Sprintf("state(%d)", uint8(d))
}

// Failed reports whether the envelope will never reach the recipient.
func (d DeliveryState) Failed() bool { return d == DeliveryExpired || d == DeliveryRefused }

// DeliveryRecord is what the store knows of one sent envelope at one
// recipient (Peer), or, for a channel Message (Channel set), at its
// readers.
type DeliveryRecord struct {
	ID   uuid.UUID
	Peer proto.PubKey // zero for a channel Message
	Kind proto.Kind
	// IsChannel marks a channel Message; Channel is its channel.
	IsChannel bool
	Channel   uuid.UUID
	State     DeliveryState
	Sent      time.Time
	Expires   time.Time
	// At is when the state was last set: the ack's arrival for
	// DeliveryDelivered, the expiry or refusal for the failed states.
	At     time.Time
	Reason string
	// Readers is how many readers a channel Message was handed to on a
	// link; Acked how many of them acknowledged it.
	Readers, Acked int
}

var zeroPeer proto.PubKey

func (r *DeliveryRecord) encode() []byte {
	b := make([]byte, deliveryRecLen, deliveryRecLen+len(r.Reason))
	b[0], b[1] = byte(r.Kind), byte(r.State)
	if r.IsChannel {
		b[2] = 1
	}
	binary.BigEndian.PutUint64(b[3:], uint64(r.Sent.UnixMilli()))
	binary.BigEndian.PutUint64(b[11:], uint64(r.Expires.UnixMilli()))
	binary.BigEndian.PutUint64(b[19:], uint64(r.At.UnixMilli()))
	binary.BigEndian.PutUint32(b[27:], uint32(r.Readers))
	binary.BigEndian.PutUint32(b[31:], uint32(r.Acked))
	copy(b[35:], r.Channel[:])
	return append(b, r.Reason...)
}

func decodeDelivery(k, v []byte) (DeliveryRecord, error) {
	if len(k) != envKLen || len(v) < deliveryRecLen || len(v) > deliveryRecLen+MaxReasonLen {
		return DeliveryRecord{}, fmt.Errorf("%w: delivery record of %d bytes under a key of %d", ErrCorrupt, len(v), len(k))
	}
	ms := func(off int) time.Time { return time.UnixMilli(int64(binary.BigEndian.Uint64(v[off:]))) }
	return DeliveryRecord{
		ID:        uuid.UUID(k[:idLen]),
		Peer:      proto.PubKey(k[idLen:]),
		Kind:      proto.Kind(v[0]),
		State:     DeliveryState(v[1]),
		IsChannel: v[2] == 1,
		Sent:      ms(3),
		Expires:   ms(11),
		At:        ms(19),
		Readers:   int(binary.BigEndian.Uint32(v[27:])),
		Acked:     int(binary.BigEndian.Uint32(v[31:])),
		Channel:   uuid.UUID(v[35 : 35+idLen]),
		Reason:    string(v[deliveryRecLen:]),
	}, nil
}

func deliveryTimeKey(sent int64, id uuid.UUID, peer proto.PubKey) []byte {
	return appendEnvKey(appendTS(make([]byte, 0, tsLen+envKLen), sent), id, peer)
}

// putDelivery writes a new record and its time index entry.
func (w *wtx) putDelivery(r *DeliveryRecord) error {
	k := appendEnvKey(nil, r.ID, r.Peer)
	if w.delivery().Get(k) != nil {
		return nil
	}
	if err := w.delivery().Put(k, r.encode()); err != nil {
		return err
	}
	return w.deliveryT().Put(deliveryTimeKey(r.Sent.UnixMilli(), r.ID, r.Peer), present)
}

// setDelivery moves the record (id, peer) to state at w.now, if it is
// still queued; a record that is missing or already final is left alone.
// It returns the record as updated, and whether it changed.
func (w *wtx) setDelivery(id uuid.UUID, peer proto.PubKey, st DeliveryState, reason string) (DeliveryRecord, bool, error) {
	k := appendEnvKey(nil, id, peer)
	v := w.delivery().Get(k)
	if v == nil {
		return DeliveryRecord{}, false, nil
	}
	r, err := decodeDelivery(k, v)
	if err != nil || r.State != DeliveryQueued {
		return r, false, err
	}
	r.State, r.At = st, w.now
	if len(reason) > MaxReasonLen {
		reason = reason[:MaxReasonLen]
	}
	r.Reason = reason
	return r, true, w.delivery().Put(k, r.encode())
}

// ackChannel counts readers' acks of our channel Message id, once per
// reader, reading and rewriting its record once. An id that names no
// channel Message of ours is ignored.
func (w *wtx) ackChannel(id uuid.UUID, readers ...proto.PubKey) error {
	w.key = appendEnvKey(w.key[:0], id, zeroPeer)
	v := w.delivery().Get(w.key)
	if v == nil {
		return nil
	}
	r, err := decodeDelivery(w.key, v)
	if err != nil {
		return err
	}
	n := 0
	for _, reader := range readers {
		w.key = appendEnvKey(w.key[:0], id, reader)
		if w.deliveryA().Get(w.key) != nil {
			continue
		}
		if err := w.deliveryA().Put(w.key, present); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	r.Acked += n
	r.At = w.now
	w.key = appendEnvKey(w.key[:0], id, zeroPeer)
	return w.delivery().Put(w.key, r.encode())
}

// failQueued records that the queued envelope raw (ours, for peer) will
// never be delivered, and puts it in our own inbox as a waking item, so
// its sender is told. It appends the updated record to failed.
func (w *wtx) failQueued(peer proto.PubKey, id uuid.UUID, raw []byte, st DeliveryState, reason string, failed *[]DeliveryRecord) error {
	r, changed, err := w.setDelivery(id, peer, st, reason)
	if err != nil || !changed {
		return err
	}
	se, err := proto.ParseEnvelope(raw)
	if err != nil {
		return fmt.Errorf("%w: queued envelope %s: %w", ErrCorrupt, id, err)
	}
	if _, err := w.putEnv(se, false, false); err != nil {
		return err
	}
	if err := w.setInbox(envKey(se.ID, se.From), PriorityHigh, true); err != nil {
		return err
	}
	*failed = append(*failed, r)
	return nil
}

// PutSent stores our own channel Message se, as [Store.Put] does, with a
// delivery record saying it was handed to readers linked readers.
func (s *Store) PutSent(se *proto.SignedEnvelope, readers int) error {
	if err := checkEnvelope(se); err != nil {
		return fmt.Errorf("put envelope: %w", err)
	}
	var added bool
	apply := func(w *wtx) (error, error) {
		out, err := w.putEnv(se, false, false)
		if err != nil {
			return nil, err
		}
		added = out == Added
		if se.To.Kind != proto.DestChannel {
			return nil, nil
		}
		r := DeliveryRecord{ID: se.ID, Kind: se.Kind, IsChannel: true, Channel: se.To.Channel, State: DeliverySent,
			Sent: se.Time(), Expires: se.Expires(), At: w.now, Readers: readers}
		return nil, w.putDelivery(&r)
	}
	return s.submit(&request{apply: apply, onCommit: func() { s.counted(se, added) }, envs: 1})
}

// DeliveryFilter selects delivery records.
type DeliveryFilter struct {
	// Pending keeps the records still queued.
	Pending bool
	// Limit keeps the newest Limit records; zero or less keeps 100.
	Limit int
}

// Deliveries returns delivery records, newest first.
func (s *Store) Deliveries(f DeliveryFilter) ([]DeliveryRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []DeliveryRecord
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDelivery)
		c := tx.Bucket(bucketDeliveryT).Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			if len(k) != tsLen+envKLen {
				return fmt.Errorf("%w: delivery-time key of %d bytes", ErrCorrupt, len(k))
			}
			rk := k[tsLen:]
			r, err := decodeDelivery(rk, b.Get(rk))
			if err != nil {
				return err
			}
			if f.Pending && r.State != DeliveryQueued {
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// DeliveriesOf returns the delivery records of the sent envelope id, one
// per recipient, or none if this node sent no such envelope.
func (s *Store) DeliveriesOf(id uuid.UUID) ([]DeliveryRecord, error) {
	var out []DeliveryRecord
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDelivery).Cursor()
		for k, v := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, v = c.Next() {
			r, err := decodeDelivery(k, v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// RefuseQueued drops everything queued for peer, and records each entry
// as refused for reason (the peer left the roster, say): its sender is
// told, as for an expired one, through the hook of
// [Store.OnDeliveryFailed]. It returns the records it changed.
func (s *Store) RefuseQueued(peer proto.PubKey, reason string) ([]DeliveryRecord, error) {
	var failed []DeliveryRecord
	err := s.write(func(w *wtx) (error, error) {
		failed = failed[:0]
		type entry struct {
			key []byte
			id  uuid.UUID
			raw []byte
		}
		var es []entry
		c := w.queue().Cursor()
		for k, v := c.Seek(peer[:]); k != nil && bytes.HasPrefix(k, peer[:]); k, v = c.Next() {
			if len(v) < 8+idLen {
				return nil, fmt.Errorf("%w: queue record of %d bytes", ErrCorrupt, len(v))
			}
			es = append(es, entry{bytes.Clone(k), uuid.UUID(v[8 : 8+idLen]), bytes.Clone(v[8+idLen:])})
		}
		for _, e := range es {
			if err := w.dropQueued(peer, e.key, e.id); err != nil {
				return nil, err
			}
			if err := w.failQueued(peer, e.id, e.raw, DeliveryRefused, reason, &failed); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, nil)
	if err == nil {
		s.deliveryFailed(failed)
	}
	return failed, err
}

// dropQueued removes one queue entry and its index.
func (w *wtx) dropQueued(peer proto.PubKey, key []byte, id uuid.UUID) error {
	if err := w.queue().Delete(key); err != nil {
		return err
	}
	if err := w.queueID().Delete(queueIDKey(peer, id)); err != nil {
		return err
	}
	return w.addCount(w.qcount(), peer[:], -1)
}

// PruneDeliveries removes the records of envelopes sent before before
// that are no longer queued, and then the oldest such records beyond
// keep. Queued records stay: the queue bounds them. It returns how many
// it removed.
func (s *Store) PruneDeliveries(before time.Time, keep int) (removed int, err error) {
	err = s.write(func(w *wtx) (error, error) {
		removed = 0
		total := w.deliveryT().Stats().KeyN
		cut := appendTS(nil, before.UnixMilli())
		var victims [][]byte
		c := w.deliveryT().Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if bytes.Compare(k[:min(len(k), tsLen)], cut) >= 0 && total-len(victims) <= keep {
				break
			}
			if len(k) != tsLen+envKLen {
				continue
			}
			rk := k[tsLen:]
			if v := w.delivery().Get(rk); len(v) > 1 && DeliveryState(v[1]) == DeliveryQueued {
				continue
			}
			victims = append(victims, bytes.Clone(k))
		}
		for _, k := range victims {
			rk := k[tsLen:]
			if err := w.deliveryT().Delete(k); err != nil {
				return nil, err
			}
			if err := w.delivery().Delete(rk); err != nil {
				return nil, err
			}
			if proto.PubKey(rk[idLen:]).Equal(zeroPeer) {
				if err := w.deleteChannelAcks(uuid.UUID(rk[:idLen])); err != nil {
					return nil, err
				}
			}
		}
		removed = len(victims)
		return nil, w.pruneRequestsOut(before.UnixMilli())
	}, nil)
	return removed, err
}

func (w *wtx) deleteChannelAcks(id uuid.UUID) error {
	var ks [][]byte
	c := w.deliveryA().Cursor()
	for k, _ := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = c.Next() {
		ks = append(ks, bytes.Clone(k))
	}
	for _, k := range ks {
		if err := w.deliveryA().Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Outgoing requests (bucket requests-out, key request id(16)): the
// recipient(32) | sent ms(8) of each Request this node queued, so that a
// Response is matched by (responder, request id) (PROTOCOL §15 step 5).
// They are kept as long as delivery records (PruneDeliveries).

func (w *wtx) putRequestOut(peer proto.PubKey, se *proto.SignedEnvelope) error {
	if se.Kind != proto.KindRequest || se.Request == nil {
		return nil
	}
	v := make([]byte, 0, keyLen+8)
	v = append(v, peer[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(se.TS))
	return w.reqOut().Put(bytes.Clone(se.Request.RequestID[:]), v)
}

// RequestRecipient returns whom this node sent the Request requestID to,
// while its record is kept; ok is false for a request id it never used.
func (s *Store) RequestRecipient(requestID uuid.UUID) (peer proto.PubKey, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketReqOut).Get(requestID[:])
		if v == nil {
			return nil
		}
		if len(v) != keyLen+8 {
			return fmt.Errorf("%w: outgoing request record of %d bytes", ErrCorrupt, len(v))
		}
		peer, ok = proto.PubKey(v[:keyLen]), true
		return nil
	})
	return peer, ok, err
}

// pruneRequestsOut removes the outgoing request records sent before cut.
func (w *wtx) pruneRequestsOut(cut int64) error {
	var ks [][]byte
	c := w.reqOut().Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(v) != keyLen+8 || int64(binary.BigEndian.Uint64(v[keyLen:])) < cut {
			ks = append(ks, bytes.Clone(k))
		}
	}
	for _, k := range ks {
		if err := w.reqOut().Delete(k); err != nil {
			return err
		}
	}
	return nil
}
