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

// Upgrades. A store written by an older build is upgraded in place when it
// is opened, in one bbolt transaction: a crash or an error part way leaves
// the old store as it was, and the next start tries again. The file is
// opened without its size limit for the upgrade, since the old and the
// new keys of every record live side by side until the commit frees the
// old pages; a store close to Config.MaxBytes can pass it by the size of
// its envelopes once, and retention or `meshctl compact` brings it back.

// schemaOf reads the schema version of db: 0 for a new file without one.
func schemaOf(db *bolt.DB) (uint64, error) {
	var v uint64
	err := db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if b := meta.Get(metaSchema); b != nil {
				if len(b) != 8 {
					return fmt.Errorf("%w: schema version of %d bytes", ErrCorrupt, len(b))
				}
				v = getU64(b)
			}
		}
		return nil
	})
	return v, err
}

// upgrade brings the store in db from schema version from to
// schemaVersion in one transaction.
func upgrade(db *bolt.DB, from uint64) (n int, err error) {
	if from < 1 || from >= schemaVersion {
		return 0, fmt.Errorf("%w: no upgrade from schema version %d", ErrCorrupt, from)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		var err error
		if from == 1 {
			if n, err = upgradeV1(tx); err != nil {
				return err
			}
		}
		if err := upgradeV2(tx); err != nil {
			return fmt.Errorf("upgrade sequence tracking: %w", err)
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(schemaVersion))
	})
	return n, err
}

// upgradeV2 turns a version 2 store's pending sequence numbers, one key
// per number in the seqs bucket, into maximal runs in the seq-runs
// bucket, and gives each stream record the count of its runs.
func upgradeV2(tx *bolt.Tx) error {
	runs, err := tx.CreateBucketIfNotExists(bucketRuns)
	if err != nil {
		return err
	}
	marks := tx.Bucket(bucketMarks)
	if marks == nil {
		return fmt.Errorf("%w: no marks bucket", ErrCorrupt)
	}
	seqs := tx.Bucket([]byte("seqs"))
	type stream struct {
		key []byte
		m   markRec
	}
	var all []stream
	c := marks.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch len(v) {
		case markRecLen: // already upgraded
		case markRecLenV2:
			all = append(all, stream{bytes.Clone(k), decodeMarkV2(v)})
		default:
			return fmt.Errorf("%w: stream record of %d bytes", ErrCorrupt, len(v))
		}
	}
	for _, st := range all {
		m := st.m
		if seqs != nil && m.pending > 0 {
			var first, last uint64
			open := false
			put := func() error {
				m.runs++
				return runs.Put(seqKey(st.key, first), binary.BigEndian.AppendUint64(nil, last))
			}
			sc := seqs.Cursor()
			for k, _ := sc.Seek(st.key); k != nil && bytes.HasPrefix(k, st.key); k, _ = sc.Next() {
				if len(k) != len(st.key)+8 {
					continue
				}
				n := binary.BigEndian.Uint64(k[len(st.key):])
				if open && n == last+1 {
					last = n
					continue
				}
				if open {
					if err := put(); err != nil {
						return err
					}
				}
				first, last, open = n, n, true
			}
			if open {
				if err := put(); err != nil {
					return err
				}
			}
		}
		if err := marks.Put(st.key, m.encode()); err != nil {
			return err
		}
	}
	if seqs != nil {
		return tx.DeleteBucket([]byte("seqs"))
	}
	return nil
}

// upgradeV1 rekeys a version 1 store, whose envelopes and inbox state
// are keyed by id alone, by (id, sender), and fills the senders bucket.
// The channel index, the dedupe set, the sequence marks, the counters and
// the queues keep their layout. It returns the envelopes rekeyed.
func upgradeV1(tx *bolt.Tx) (int, error) {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return 0, err
		}
	}
	env := tx.Bucket(bucketEnv)
	// senderOf reads the sender from an envelope record under its old key.
	senderOf := func(id []byte) (proto.PubKey, error) {
		v := env.Get(id)
		if v == nil {
			return proto.PubKey{}, fmt.Errorf("%w: index entry without envelope %s", ErrCorrupt, uuid.UUID(id))
		}
		m, err := decodeEnv(uuid.UUID(id), v)
		return m.From, err
	}
	// The indexes first, while the envelopes are still under their ids.
	// direct: ts | id → ts | id | sender.
	if err := rekey(tx.Bucket(bucketDirIdx), tsLen+idLen, func(k []byte) ([]byte, error) {
		from, err := senderOf(k[tsLen:])
		return append(bytes.Clone(k), from[:]...), err
	}); err != nil {
		return 0, fmt.Errorf("upgrade direct index: %w", err)
	}
	// inbox-time: delivered | id → delivered | id | sender.
	if err := rekey(tx.Bucket(bucketInboxT), tsLen+idLen, func(k []byte) ([]byte, error) {
		from, err := senderOf(k[tsLen:])
		return append(bytes.Clone(k), from[:]...), err
	}); err != nil {
		return 0, fmt.Errorf("upgrade inbox index: %w", err)
	}
	// inbox: id → id | sender.
	if err := rekey(tx.Bucket(bucketInbox), idLen, func(k []byte) ([]byte, error) {
		from, err := senderOf(k)
		return append(bytes.Clone(k), from[:]...), err
	}); err != nil {
		return 0, fmt.Errorf("upgrade inbox: %w", err)
	}
	// env: id → id | sender, counting each sender's direct envelopes.
	use := map[proto.PubKey]usage{}
	n := 0
	if err := rekey(env, idLen, func(k []byte) ([]byte, error) {
		m, err := decodeEnv(uuid.UUID(k), env.Get(k))
		if err != nil {
			return nil, err
		}
		if m.To.Kind != proto.DestChannel {
			u := use[m.From]
			u.bytes += uint64(m.Size)
			u.count++
			use[m.From] = u
		}
		n++
		return append(bytes.Clone(k), m.From[:]...), nil
	}); err != nil {
		return 0, fmt.Errorf("upgrade envelopes: %w", err)
	}
	senders := tx.Bucket(bucketSenders)
	for from, u := range use {
		v := make([]byte, usageRecLen)
		copy(v, u64(u.bytes))
		copy(v[8:], u64(u.count))
		if err := senders.Put(bytes.Clone(from[:]), v); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// rekey moves every entry of b whose key is oldLen bytes long to the key
// newKey gives, with the same value. Keys of other lengths are left
// alone, so an upgrade cut short and retried moves only what is left.
func rekey(b *bolt.Bucket, oldLen int, newKey func(k []byte) ([]byte, error)) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) == oldLen {
			keys = append(keys, bytes.Clone(k))
		}
	}
	for _, k := range keys {
		nk, err := newKey(k)
		if err != nil {
			return err
		}
		// Not copied: v points into the mapped file or into a node of
		// this transaction, and bbolt copies what its nodes reference
		// before it remaps the file.
		v := b.Get(k)
		if err := b.Put(nk, v); err != nil {
			return err
		}
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// upgradeFile upgrades the store at path, whose schema is version from,
// with the file's size limit lifted, and closes it.
func upgradeFile(path string, from uint64, cfg Config) error {
	start := time.Now()
	db, err := openBolt(path, &bolt.Options{
		Timeout:        cfg.LockTimeout,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return fmt.Errorf("open history store %s for its upgrade: %w", path, err)
	}
	n, err := upgrade(db, from)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("upgrade history store %s from schema %d: %w", path, from, err)
	}
	cfg.Logger.Info("history store upgraded", "path", path, "from", from, "to", schemaVersion,
		"envelopes", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
