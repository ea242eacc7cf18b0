package history

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// Prune applies a channel's retention as of now: by age, then by count.
//
// Age: an envelope goes once it is older than maxAge, aged from
// min(ts, received): a ts ahead of this node's clock (at most
// proto.MaxClockSkew, or it was refused) buys no longer life. Unread
// inbox items go by age like any other.
//
// Count: beyond that, while more than maxCount remain, envelopes go
// fairly by sender (see [Store.pruneByCount]): the sender holding the most
// loses its oldest first, so one member's flood never evicts another
// member's messages while the flood holds more. Unread inbox items are
// never evicted by count; they wait to be read or to age out.
//
// A zero maxAge or maxCount disables that limit. It also drops the
// channel's sequence tracking for streams silent for longer than maxAge.
// Deletions run in transactions of at most Config.PruneChunk, each riding
// in a writer batch, so deliveries are never held up for long. Dedupe
// entries stay until [Store.PruneSeen].
func (s *Store) Prune(channel uuid.UUID, maxAge time.Duration, maxCount int, now time.Time) (removed int, err error) {
	if maxAge > 0 {
		cutoff := now.Add(-maxAge).UnixMilli()
		if removed, err = s.pruneByAge(channel, cutoff); err != nil {
			return removed, err
		}
	}
	if maxCount > 0 {
		k, err := s.pruneByCount(channel, maxCount)
		removed += k
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// pruneByAge removes channel's envelopes aged (min(ts, received)) before
// cutoff. The index is in ts order: every key with ts < cutoff goes, and
// the keys within proto.MaxClockSkew after it are read to see whether
// they were received before the cutoff.
func (s *Store) pruneByAge(channel uuid.UUID, cutoff int64) (int, error) {
	horizon := cutoff + proto.MaxClockSkew.Milliseconds()
	return s.pruneInChunks(&s.st.pruned, func(w *wtx) (n int, done bool, err error) {
		var victims []Stored
		c := w.chanIdx().Cursor()
		for k, _ := c.Seek(channel[:]); ; k, _ = c.Next() {
			if len(victims) == w.s.cfg.PruneChunk {
				break
			}
			if k == nil || !bytes.HasPrefix(k, channel[:]) || len(k) != chanKeyLen {
				done = true
				break
			}
			e := parseChanKey(k)
			if e.ts >= horizon {
				done = true
				break
			}
			m := chanStored(channel, e)
			if e.ts >= cutoff && w.received(&m) >= cutoff {
				continue
			}
			victims = append(victims, m)
		}
		if err := w.deleteVictims(victims); err != nil {
			return 0, false, err
		}
		n = len(victims)
		if done {
			return n, done, w.pruneStreams(destKey(proto.ToChannel(channel)), cutoff)
		}
		return n, done, nil
	})
}

// chanStored is the part of a Stored that a channel index entry names.
func chanStored(channel uuid.UUID, e chanEntry) Stored {
	var m Stored
	m.ID, m.TS, m.Seq, m.To = e.id, e.ts, e.seq, proto.ToChannel(channel)
	copy(m.From[:], e.stream)
	copy(m.Epoch[:], e.stream[keyLen:])
	return m
}

// received returns when m was stored (Unix ms), or its ts when the
// record cannot be read.
func (w *wtx) received(m *Stored) int64 {
	v := w.env().Get(appendEnvKey(w.key[:0], m.ID, m.From))
	if len(v) < 2+8 {
		return m.TS
	}
	return int64(binary.BigEndian.Uint64(v[2:]))
}

// unread reports whether (from, id) is an unread inbox item.
func (w *wtx) unread(id uuid.UUID, from proto.PubKey) bool {
	v := w.inbox().Get(appendEnvKey(w.key[:0], id, from))
	if v == nil {
		return false
	}
	r, err := decodeInbox(v)
	return err == nil && !r.read
}

// deleteVictims deletes the envelopes of victims, noting the inbox items
// among them for Config.InboxPruned.
func (w *wtx) deleteVictims(victims []Stored) error {
	for i := range victims {
		m := &victims[i]
		if v := w.inbox().Get(appendEnvKey(w.key[:0], m.ID, m.From)); v != nil {
			if r, err := decodeInbox(v); err == nil {
				w.gone = append(w.gone, PrunedItem{ID: m.ID, From: m.From, Delivered: time.UnixMilli(r.delivered)})
			}
		}
		if !w.s.cfg.Self.Equal(zeroPeer) && m.From.Equal(w.s.cfg.Self) {
			w.gone = append(w.gone, PrunedItem{ID: m.ID, From: m.From, Delivered: time.UnixMilli(m.TS), Sent: true})
		}
		if err := w.deleteEnv(m); err != nil {
			return err
		}
	}
	return nil
}

// PruneDirect removes envelopes not addressed to a channel (DMs, Requests,
// Responses) with ts older than maxAge, with their inbox state, and drops
// the sequence tracking of non-channel streams silent for longer.
func (s *Store) PruneDirect(maxAge time.Duration, now time.Time) (removed int, err error) {
	if maxAge <= 0 {
		return 0, nil
	}
	cutoff := now.Add(-maxAge).UnixMilli()
	return s.pruneInChunks(&s.st.pruned, func(w *wtx) (n int, done bool, err error) {
		var victims []Stored
		c := w.dirIdx().Cursor()
		for k, _ := c.First(); ; k, _ = c.Next() {
			if len(victims) == w.s.cfg.PruneChunk {
				break
			}
			if k == nil || len(k) != tsLen+envKLen || getTS(k) >= cutoff {
				done = true
				break
			}
			var m Stored
			m.TS, m.ID, m.From = getTS(k), uuid.UUID(k[tsLen:]), proto.PubKey(k[tsLen+idLen:])
			m.To.Kind = proto.DestPeer // any kind but channel: the direct index
			victims = append(victims, m)
		}
		if err := w.deleteVictims(victims); err != nil {
			return 0, false, err
		}
		n = len(victims)
		if done {
			for _, kind := range []proto.DestKind{proto.DestPeer, proto.DestOrg} {
				if err := w.pruneStreams([]byte{byte(kind)}, cutoff); err != nil {
					return 0, false, err
				}
			}
		}
		return n, done, nil
	})
}

// PruneSeen forgets dedupe entries of envelopes with ts older than
// Config.SeenMaxAge. By then a live copy is long expired (ts + ttl) and
// every peer has pruned its history copy, so neither can come back. The
// in-memory set keeps what it holds; it is bounded by size.
func (s *Store) PruneSeen(now time.Time) (removed int, err error) {
	cutoff := now.Add(-s.cfg.SeenMaxAge).UnixMilli()
	return s.pruneInChunks(&s.st.seenPruned, func(w *wtx) (n int, done bool, err error) {
		var keys [][]byte
		c := w.seenAge().Cursor()
		for k, _ := c.First(); ; k, _ = c.Next() {
			if len(keys) == w.s.cfg.PruneChunk {
				break
			}
			if k == nil || len(k) != tsLen+seenKLen || getTS(k) >= cutoff {
				done = true
				break
			}
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := w.seenAge().Delete(k); err != nil {
				return 0, false, err
			}
			if err := w.seen().Delete(k[tsLen:]); err != nil {
				return 0, false, err
			}
		}
		n = len(keys)
		return n, done, nil
	})
}

// pruneInChunks runs step in write transactions until it reports done and
// returns how many entries the steps removed, also added to counter. Each
// step removes at most Config.PruneChunk entries and rides in a writer
// batch, so deliveries are never held up for long.
func (s *Store) pruneInChunks(counter *atomic.Uint64, step func(w *wtx) (n int, done bool, err error)) (removed int, err error) {
	return s.pruneChunks(counter, step, nil)
}

// pruneChunks is pruneInChunks that calls committed, if not nil, after
// each chunk's transaction is committed.
func (s *Store) pruneChunks(counter *atomic.Uint64, step func(w *wtx) (n int, done bool, err error), committed func()) (removed int, err error) {
	for {
		var n int
		var done bool
		var gone []PrunedItem
		err := s.write(func(w *wtx) (error, error) {
			var serr error
			w.gone = w.gone[:0]
			n, done, serr = step(w)
			gone = append(gone[:0], w.gone...)
			return nil, serr
		}, nil)
		if err != nil {
			return removed, err
		}
		if committed != nil {
			committed()
		}
		removed += n
		counter.Add(uint64(n))
		if len(gone) > 0 && s.cfg.InboxPruned != nil {
			s.cfg.InboxPruned(gone)
		}
		if done {
			return removed, nil
		}
	}
}

// ExpireQueues removes expired entries (ts + ttl before now) from every
// store-and-forward queue, including those of peers that never return.
func (s *Store) ExpireQueues(now time.Time) (removed int, err error) {
	nowMS := now.UnixMilli()
	var failed []DeliveryRecord
	err = s.write(func(w *wtx) (error, error) {
		removed, failed = 0, failed[:0]
		type victim struct{ key, idKey, peer, raw []byte }
		var victims []victim
		c := w.queue().Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != keyLen+8 || len(v) < 8+idLen {
				continue
			}
			if int64(binary.BigEndian.Uint64(v)) >= nowMS {
				continue
			}
			peer := bytes.Clone(k[:keyLen])
			victims = append(victims, victim{bytes.Clone(k), append(bytes.Clone(peer), v[8:8+idLen]...), peer, bytes.Clone(v[8+idLen:])})
		}
		for _, vi := range victims {
			if err := w.queue().Delete(vi.key); err != nil {
				return nil, err
			}
			if err := w.queueID().Delete(vi.idKey); err != nil {
				return nil, err
			}
			if err := w.addCount(w.qcount(), vi.peer, -1); err != nil {
				return nil, err
			}
			if err := w.failQueued(proto.PubKey(vi.peer), uuid.UUID(vi.idKey[keyLen:]), vi.raw, DeliveryExpired, "", &failed); err != nil {
				return nil, err
			}
		}
		removed = len(victims)
		return nil, nil
	}, nil)
	if err == nil {
		s.st.queueExpired.Add(uint64(removed))
		s.deliveryFailed(failed)
	}
	return removed, err
}
