package history

import (
	"bytes"
	"sort"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// PrunedItem is an inbox item that retention removed with its envelope:
// what the mailbox mirror needs to find and remove its file.
type PrunedItem struct {
	ID        uuid.UUID
	From      proto.PubKey
	Delivered time.Time
	// Sent marks an envelope of this node's own (Config.Self): its file
	// in the mailbox's sent folder goes too. Delivered is then its ts.
	Sent bool
}

// pruneByCount removes channel's envelopes beyond maxCount, fairly by
// sender: it finds the level L such that taking every sender's
// evictable envelopes down to L frees enough, and each sender above L
// loses its oldest (in ts order) down to it. A sender holding the most
// therefore loses first, and a sender holding fewer than the others
// loses nothing until they are down to its size. Unread inbox items are
// not evictable: they are kept whatever the count, and go by age.
func (s *Store) pruneByCount(channel uuid.UUID, maxCount int) (int, error) {
	quota, err := s.countPlan(channel, maxCount)
	if err != nil || len(quota) == 0 {
		return 0, err
	}
	var after []byte // where the next chunk starts: the last key a chunk looked at
	var last []byte
	var taken []Stored
	step := func(w *wtx) (n int, done bool, err error) {
		left := make(map[proto.PubKey]int, len(quota))
		for k, q := range quota {
			left[k] = q
		}
		taken, last = taken[:0], last[:0]
		c := w.chanIdx().Cursor()
		k, _ := c.Seek(channel[:])
		if after != nil {
			k, _ = c.Seek(after)
		}
		for ; ; k, _ = c.Next() {
			if len(taken) == w.s.cfg.PruneChunk {
				break
			}
			if k == nil || !bytes.HasPrefix(k, channel[:]) || len(k) != chanKeyLen {
				done = true
				break
			}
			last = append(last[:0], k...)
			m := chanStored(channel, parseChanKey(k))
			if left[m.From] == 0 || w.unread(m.ID, m.From) {
				continue
			}
			left[m.From]--
			taken = append(taken, m)
		}
		if err := w.deleteVictims(taken); err != nil {
			return 0, false, err
		}
		return len(taken), done, nil
	}
	// A chunk's deletions sort before last and what it skipped stays
	// skipped, so the next chunk starts at last. The state moves on only
	// once a chunk is committed: a batch retried in halves runs it again.
	committed := func() {
		after = append(after[:0], last...)
		for _, m := range taken {
			quota[m.From]--
		}
	}
	return s.pruneChunks(&s.st.pruned, step, committed)
}

// countPlan returns how many envelopes each sender loses so that at most
// maxCount of channel's remain (or, if unread items hold more, every
// evictable one goes): the water-filling described at pruneByCount.
func (s *Store) countPlan(channel uuid.UUID, maxCount int) (map[proto.PubKey]int, error) {
	total := 0
	evictable := map[proto.PubKey]int{}
	err := s.view(func(tx *bolt.Tx) error {
		if int(getU64(tx.Bucket(bucketCounts).Get(channel[:]))) <= maxCount {
			return nil // within the count: no scan
		}
		inbox := tx.Bucket(bucketInbox)
		key := make([]byte, 0, envKLen)
		c := tx.Bucket(bucketChanIdx).Cursor()
		for k, _ := c.Seek(channel[:]); k != nil && bytes.HasPrefix(k, channel[:]); k, _ = c.Next() {
			if len(k) != chanKeyLen {
				continue
			}
			total++
			e := parseChanKey(k)
			from := proto.PubKey(e.stream[:keyLen])
			if v := inbox.Get(appendEnvKey(key[:0], e.id, from)); v != nil {
				if r, err := decodeInbox(v); err == nil && !r.read {
					continue
				}
			}
			evictable[from]++
		}
		return nil
	})
	if err != nil || total <= maxCount {
		return nil, err
	}
	return waterFill(evictable, total-maxCount), nil
}

// waterFill returns, for counts by sender, how many each loses so that
// excess go in all, taken from the largest first: every sender is cut to
// a common level L, the highest at which enough goes, and the surplus is
// given back one apiece to senders above L, in key order.
func waterFill(counts map[proto.PubKey]int, excess int) map[proto.PubKey]int {
	over := func(level int) int {
		sum := 0
		for _, c := range counts {
			sum += max(0, c-level)
		}
		return sum
	}
	hi := 0
	for _, c := range counts {
		hi = max(hi, c)
	}
	lo := 0 // over(lo) ≥ excess, or lo = 0 and everything goes
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if over(mid) >= excess {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	keys := make([]proto.PubKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i][:], keys[j][:]) < 0 })
	out := make(map[proto.PubKey]int, len(counts))
	surplus := over(lo) - excess
	for _, k := range keys {
		q := max(0, counts[k]-lo)
		if q > 0 && surplus > 0 {
			q--
			surplus--
		}
		if q > 0 {
			out[k] = q
		}
	}
	return out
}
