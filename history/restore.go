package history

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// Restored is an envelope taken back into a rebuilt store (meshctl
// repair builds one from the mailbox mirror), with the inbox state its
// mailbox file tells.
type Restored struct {
	Env         *proto.SignedEnvelope
	FromHistory bool
	Priority    Priority
	// Delivered is when it reached the inbox (the mailbox file's name
	// gives it to the second).
	Delivered time.Time
	// Read marks it read, at Delivered.
	Read bool
}

// Restore stores envelopes whose signatures the caller has verified, and
// puts each in the inbox with the state rs gives, in one write request.
// added[i] reports whether rs[i] was new: a duplicate (the same envelope
// in two files) is neither stored again nor its inbox state changed.
func (s *Store) Restore(rs []Restored) (added []bool, err error) {
	for i, r := range rs {
		if err := checkEnvelope(r.Env); err != nil {
			return nil, fmt.Errorf("restore envelope #%d: %w", i, err)
		}
		if r.Priority < PriorityHigh || r.Priority > PriorityLow {
			return nil, fmt.Errorf("restore envelope #%d: unknown %s", i, r.Priority)
		}
	}
	added = make([]bool, len(rs))
	apply := func(w *wtx) (error, error) {
		for i, r := range rs {
			// No budget: these were stored within it before.
			o, err := w.putEnv(r.Env, r.FromHistory, false)
			if err != nil {
				return nil, err
			}
			added[i] = o == Added
			if !added[i] {
				continue
			}
			rec := inboxRec{priority: r.Priority, delivered: r.Delivered.UnixMilli(), read: r.Read}
			if r.Read {
				rec.readAt = rec.delivered
			}
			ek := envKey(r.Env.ID, r.Env.From)
			if err := w.inboxT().Put(inboxTimeKey(rec.delivered, ek), present); err != nil {
				return nil, err
			}
			if err := w.inbox().Put(ek[:], rec.encode()); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	onCommit := func() {
		for i, r := range rs {
			s.counted(r.Env, added[i])
		}
	}
	if err := s.submit(&request{apply: apply, onCommit: onCommit, envs: len(rs)}); err != nil {
		return nil, err
	}
	return added, nil
}

// ForgetSeqMarks drops every stream's sequence marks and pending numbers.
// Marks tell history sync what a node holds: a stream's messages above
// its mark are asked for, and those below never are. Without marks, the
// next round of each channel asks by time alone (the retention window)
// and a live envelope that arrives first starts its stream's tracking
// anew, above the numbers it missed; a store rebuilt from copies keeps
// the marks its envelopes give and asks for a backfill instead
// ([Store.SetBackfill]).
func (s *Store) ForgetSeqMarks() error {
	return s.write(func(w *wtx) (error, error) {
		for _, name := range [][]byte{bucketMarks, bucketRuns} {
			if err := w.tx.DeleteBucket(name); err != nil {
				return nil, err
			}
			if _, err := w.tx.CreateBucket(name); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, nil)
}

// SetBackfill records whether history sync should backfill every channel
// as if newly joined: ask without marks, by time alone, so that the
// older part of streams whose first numbers the store lacks is filled
// too. meshctl repair sets it on the store it rebuilds; the node clears
// it once every channel it reads was backfilled.
func (s *Store) SetBackfill(on bool) error {
	return s.write(func(w *wtx) (error, error) {
		if !on {
			return nil, w.meta().Delete(metaBackfill)
		}
		return nil, w.meta().Put(metaBackfill, []byte{1})
	}, nil)
}

// Backfill reports whether [Store.SetBackfill] asked for a backfill.
func (s *Store) Backfill() (bool, error) {
	on := false
	err := s.view(func(tx *bolt.Tx) error {
		on = tx.Bucket(bucketMeta).Get(metaBackfill) != nil
		return nil
	})
	return on, err
}
