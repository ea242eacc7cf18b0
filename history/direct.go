package history

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Direct returns the stored peer-addressed envelopes (DMs, Requests,
// Responses, this node's own included) sent at or after since whose
// metadata match accepts, newest first, at most limit (all if limit ≤
// 0). Raw is a copy. It reads the direct index, which retention bounds
// (72 h of direct messages by default).
func (s *Store) Direct(since time.Time, limit int, match func(*Meta) bool) ([]Stored, error) {
	var out []Stored
	sinceMS := int64(-1 << 63)
	if !since.IsZero() {
		sinceMS = since.UnixMilli()
	}
	err := s.view(func(tx *bolt.Tx) error {
		env := tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketDirIdx).Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if len(k) != tsLen+envKLen {
				return fmt.Errorf("%w: direct index key of %d bytes", ErrCorrupt, len(k))
			}
			if getTS(k) < sinceMS {
				break
			}
			st, err := inboxEnv(env, [envKLen]byte(k[tsLen:]))
			if err != nil {
				return err
			}
			if match != nil && !match(&st.Meta) {
				continue
			}
			st.Raw = bytes.Clone(st.Raw)
			out = append(out, st)
		}
		return nil
	})
	return out, err
}
