package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Stats is a snapshot of the store's size and activity.
type Stats struct {
	// FileSize is the database file's size in bytes. bbolt never shrinks
	// it; [Store.Compact] writes a compact copy.
	FileSize int64
	// Envelopes is the number of stored envelopes; Channels breaks the
	// channel ones down by channel, and Direct counts the rest.
	Envelopes int
	Channels  map[uuid.UUID]int
	Direct    int
	// Queues is the number of store-and-forward entries per peer.
	Queues map[proto.PubKey]int

	// Commits counts committed write transactions, Requests the write
	// requests they held. Requests/Commits is the average batch.
	Commits  uint64
	Requests uint64
	// AvgBatch is Requests/Commits.
	AvgBatch float64
	// EnvelopesPerCommit is the average number of envelopes put per
	// commit, duplicates included, over the commits that put any.
	EnvelopesPerCommit float64
	// FailedTx counts transactions rolled back (and retried in halves).
	FailedTx uint64
	// Unwritten counts batches that changed nothing (a retention pass
	// with nothing due), rolled back instead of committed and synced;
	// they are not in Commits.
	Unwritten uint64

	Stored     uint64 // envelopes added by Put
	Duplicates uint64 // envelopes Put refused as already seen
	// OverBudget counts peer-addressed envelopes Deliver refused because
	// their sender's budget (Config.MaxSenderBytes, MaxSenderEnvelopes)
	// was used up.
	OverBudget uint64
	Pruned     uint64 // envelopes removed by retention
	SeenPruned uint64 // dedupe entries forgotten by PruneSeen
	// QueueExpired counts store-and-forward entries dropped as expired.
	QueueExpired uint64
	// HistorySkipped counts envelopes left out of history pages because
	// each alone exceeded the request's max_bytes.
	HistorySkipped uint64
	// SeenCacheHits and SeenCacheMisses count Seen lookups answered from
	// memory and from the file.
	SeenCacheHits, SeenCacheMisses uint64
	SeenCacheLen                   int
}

// Stats returns the current statistics.
func (s *Store) Stats() (Stats, error) {
	st := Stats{
		Channels:        map[uuid.UUID]int{},
		Queues:          map[proto.PubKey]int{},
		Commits:         s.st.commits.Load(),
		Requests:        s.st.requests.Load(),
		FailedTx:        s.st.failedTx.Load(),
		Unwritten:       s.st.emptyTx.Load(),
		Stored:          s.st.envelopes.Load(),
		Duplicates:      s.st.duplicates.Load(),
		OverBudget:      s.st.overBudget.Load(),
		Pruned:          s.st.pruned.Load(),
		SeenPruned:      s.st.seenPruned.Load(),
		QueueExpired:    s.st.queueExpired.Load(),
		HistorySkipped:  s.st.histSkipped.Load(),
		SeenCacheHits:   s.st.cacheHits.Load(),
		SeenCacheMisses: s.st.cacheMisses.Load(),
		SeenCacheLen:    s.seen.len(),
	}
	if st.Commits > 0 {
		st.AvgBatch = float64(st.Requests) / float64(st.Commits)
	}
	if n := s.st.putCommits.Load(); n > 0 {
		st.EnvelopesPerCommit = float64(s.st.batchedEnvs.Load()) / float64(n)
	}
	err := s.view(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketCounts).ForEach(func(k, v []byte) error {
			n := int(getU64(v))
			st.Envelopes += n
			if len(k) == idLen {
				st.Channels[uuid.UUID(k)] = n
			} else {
				st.Direct += n
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketQCount).ForEach(func(k, v []byte) error {
			if len(k) == keyLen {
				st.Queues[proto.PubKey(k)] = int(getU64(v))
			}
			return nil
		})
	})
	if err != nil {
		return st, err
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return st, fmt.Errorf("stat history store: %w", err)
	}
	st.FileSize = fi.Size()
	return st, nil
}

// Reclaimable returns the bytes of free pages inside the store's file and
// the file's size: what [CompactFile] would give back, roughly.
func (s *Store) Reclaimable() (free, size int64, err error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, 0, fmt.Errorf("stat history store: %w", err)
	}
	st := s.db.Stats()
	return int64(st.FreePageN+st.PendingPageN) * int64(s.db.Info().PageSize), fi.Size(), nil
}

// CompactFile compacts the store at path in place: a compacted copy is
// written beside it (path + ".compact", synced) and renamed over it, and
// the directory is synced. The caller must hold the home's lock, so no
// store is open on path; a copy left by an interrupted compaction is
// removed first. It returns the file's size before and after.
func CompactFile(path string, cfg Config) (before, after int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("history store: %w", err)
	}
	before = fi.Size()
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return before, 0, fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	st, err := Open(path, cfg)
	if err != nil {
		return before, 0, err
	}
	if err := st.Compact(tmp); err != nil {
		st.Close()
		return before, 0, err
	}
	if err := st.Close(); err != nil {
		os.Remove(tmp)
		return before, 0, err
	}
	// The copy is complete and synced; the rename swaps it in atomically
	// and the directory sync makes the swap durable.
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return before, 0, fmt.Errorf("replace %s: %w", path, err)
	}
	if err := syncDirOf(path); err != nil {
		return before, 0, err
	}
	if fi, err = os.Stat(path); err != nil {
		return before, 0, fmt.Errorf("history store: %w", err)
	}
	return before, fi.Size(), nil
}

// Compact writes a compacted copy of the store to dst, which must not
// exist. It reads the store in one long read transaction, during which
// the writer cannot reuse freed pages: run it when the node is quiet (at
// start, or from `meshctl compact`), then swap the files while the store
// is closed.
func (s *Store) Compact(dst string) (err error) {
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("compact history store into %s: destination exists or is unreadable", dst)
	}
	out, err := bolt.Open(dst, 0o600, &bolt.Options{
		Timeout:        s.cfg.LockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return fmt.Errorf("compact history store into %s: %w", dst, err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("compact history store into %s: %w", dst, cerr)
		}
		if err != nil {
			os.Remove(dst)
		}
	}()
	if err := bolt.Compact(out, s.db, 4<<20); err != nil {
		return fmt.Errorf("compact history store into %s: %w", dst, s.txError(err))
	}
	return syncDirOf(dst)
}
