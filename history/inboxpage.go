package history

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrBadCursor: an inbox cursor that no [Store.InboxPage] answer made.
var ErrBadCursor = errors.New("not an inbox cursor")

// InboxPageQuery selects one page of the inbox, in delivery order
// (oldest first). The page starts after After; without it at the oldest
// item if FromStart; otherwise at the Newest-th newest item that passes
// the filter (all items if Newest is 0).
type InboxPageQuery struct {
	UnreadOnly bool
	After      []byte // a cursor: an [InboxPage].Next
	FromStart  bool
	Newest     int
	// Limit bounds the page's items (at least 1); MaxBytes bounds the
	// wire size of their envelopes, beyond the first item, which is
	// always taken.
	Limit    int
	MaxBytes int
	// NeedWaking asks for [InboxPage].Waking, which reads the inbox
	// state of every item after the page's start.
	NeedWaking bool
	// Since keeps items delivered at or after it (zero: all); Match,
	// when set, keeps the items whose envelope metadata it accepts.
	Since time.Time
	Match func(*Meta) bool
}

// InboxPage is one page of the inbox.
type InboxPage struct {
	Items []InboxItem
	// Next is the cursor after the page's last item when more items
	// passing the filter follow it; nil at the end.
	Next []byte
	// Waking reports an unread waking item from the page's start to the
	// end of the inbox (with NeedWaking).
	Waking bool
}

// InboxPage returns one page of the inbox. A page holds each envelope
// once in memory, so a caller bounds memory with Limit and MaxBytes
// however large the inbox is. Items delivered while a caller pages come
// after the cursor of a page already read, so paging to the end misses
// nothing that was there at the start.
func (s *Store) InboxPage(q InboxPageQuery) (InboxPage, error) {
	if q.After != nil && len(q.After) != tsLen+envKLen {
		return InboxPage{}, fmt.Errorf("%w: %d bytes", ErrBadCursor, len(q.After))
	}
	q.Limit = max(q.Limit, 1)
	sinceMS := int64(-1 << 63)
	if !q.Since.IsZero() {
		sinceMS = q.Since.UnixMilli()
	}
	var out InboxPage
	err := s.view(func(tx *bolt.Tx) error {
		inbox, env := tx.Bucket(bucketInbox), tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketInboxT).Cursor()
		// pass decodes the item at k and says whether it passes the filter.
		pass := func(k []byte) (inboxRec, bool, error) {
			if len(k) != tsLen+envKLen {
				return inboxRec{}, false, fmt.Errorf("%w: inbox index key of %d bytes", ErrCorrupt, len(k))
			}
			ek := [envKLen]byte(k[tsLen:])
			r, err := decodeInbox(inbox.Get(ek[:]))
			if err != nil {
				return inboxRec{}, false, err
			}
			if (q.UnreadOnly && r.read) || r.delivered < sinceMS {
				return r, false, nil
			}
			if q.Match != nil {
				m, err := inboxEnv(env, ek)
				if err != nil {
					return inboxRec{}, false, err
				}
				if !q.Match(&m.Meta) {
					return r, false, nil
				}
			}
			return r, true, nil
		}

		var k []byte
		switch {
		case q.After != nil:
			if k, _ = c.Seek(q.After); k != nil && bytes.Equal(k, q.After) {
				k, _ = c.Next()
			}
		case q.FromStart || q.Newest <= 0:
			k, _ = c.First()
		default:
			n := 0
			for k, _ = c.Last(); k != nil; k, _ = c.Prev() {
				_, ok, err := pass(k)
				if err != nil {
					return err
				}
				if ok {
					if n++; n == q.Newest {
						break
					}
				}
			}
			if k == nil {
				k, _ = c.First()
			}
		}

		total := 0
		var last []byte
		full := false
		for ; k != nil; k, _ = c.Next() {
			r, ok, err := pass(k)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if !full {
				m, err := inboxEnv(env, [envKLen]byte(k[tsLen:]))
				if err != nil {
					return err
				}
				if len(out.Items) == q.Limit || (len(out.Items) > 0 && total+m.Size > q.MaxBytes) {
					full = true
					out.Next = bytes.Clone(last)
				} else {
					total += m.Size
					last = k
					m.Raw = nil
					out.Items = append(out.Items, InboxItem{
						Meta: m.Meta, Priority: r.priority, Wakes: r.wakes, Read: r.read,
						Delivered: timeOf(r.delivered), ReadAt: timeOf(r.readAt),
					})
				}
			}
			if r.wakes && !r.read {
				out.Waking = true
			}
			if full && (!q.NeedWaking || out.Waking) {
				break
			}
		}
		return nil
	})
	if err != nil {
		return InboxPage{}, err
	}
	return out, nil
}
