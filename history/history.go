package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// History answers a HistoryRequest from the channel's stored envelopes.
//
// An envelope of the channel is included when
//
//   - the request holds a mark for its (sender, epoch) and its seq is
//     above that mark (the requester lacks it, however old it is: this is
//     how gaps are filled), or
//   - the request holds no mark for its (sender, epoch) and its ts is at
//     or after SinceTS.
//
// An envelope whose seq is at or below its stream's mark is never sent:
// the requester holds it. Matching envelopes are returned as their wire
// bytes in (ts, sender, epoch, seq, id) order: time order, with ties
// broken so that each stream's envelopes come in seq order. The page
// holds at most MaxMessages envelopes and MaxBytes bytes (the sum of the
// wire lengths); zero limits take the protocol defaults, and limits above
// the protocol maxima are lowered to them. more reports that the page was
// cut by a limit and further envelopes match. An envelope larger than
// MaxBytes on its own can never be served under that limit: it is skipped
// (and counted in [Stats]), without setting more, so paging ends.
//
// Use [NextHistoryRequest] to build the request for the following page;
// paging that way returns every matching envelope once, however many
// share a timestamp.
func (s *Store) History(req *proto.HistoryRequest) (msgs [][]byte, more bool, err error) {
	if req == nil {
		return nil, false, errors.New("history: nil request")
	}
	maxMsgs := int(req.MaxMessages)
	if maxMsgs == 0 {
		maxMsgs = proto.DefaultHistoryMessages
	}
	maxMsgs = min(maxMsgs, proto.MaxHistoryMessages)
	maxBytes := int(req.MaxBytes)
	if maxBytes == 0 {
		maxBytes = proto.MaxHistoryBytes
	}
	maxBytes = min(maxBytes, proto.MaxHistoryBytes)

	marks := make(map[[keyLen + idLen]byte]uint64, len(req.SinceSeqBySender))
	for _, m := range req.SinceSeqBySender {
		var k [keyLen + idLen]byte
		copy(k[:], m.Sender[:])
		copy(k[keyLen:], m.Epoch[:])
		marks[k] = m.LastSeq
	}
	ch := req.ChannelID
	start := ch[:]
	if len(marks) == 0 {
		// Without marks nothing before SinceTS can match.
		start = make([]byte, idLen+tsLen)
		copy(start, ch[:])
		putTS(start[idLen:], req.SinceTS)
	}
	skipped := 0
	total := 0
	err = s.view(func(tx *bolt.Tx) error {
		env := tx.Bucket(bucketEnv)
		c := tx.Bucket(bucketChanIdx).Cursor()
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, ch[:]); k, v = c.Next() {
			if len(k) != chanKeyLen || len(v) != 4 {
				return fmt.Errorf("%w: channel index entry of %d+%d bytes", ErrCorrupt, len(k), len(v))
			}
			e := parseChanKey(k)
			if mark, ok := marks[[keyLen + idLen]byte(e.stream)]; ok {
				if e.seq <= mark {
					continue
				}
			} else if e.ts < req.SinceTS {
				continue
			}
			size := int(binary.BigEndian.Uint32(v))
			if size > maxBytes {
				skipped++
				continue
			}
			if len(msgs) == maxMsgs || total+size > maxBytes {
				more = true
				return nil
			}
			rec := env.Get(e.envKey())
			if rec == nil {
				return fmt.Errorf("%w: index entry without envelope %s", ErrCorrupt, e.id)
			}
			m, err := decodeEnv(e.id, rec)
			if err != nil {
				return err
			}
			msgs = append(msgs, bytes.Clone(m.Raw))
			total += size
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if skipped > 0 {
		s.st.histSkipped.Add(uint64(skipped))
	}
	return msgs, more, nil
}

// NextHistoryRequest returns the request for the page after page, the
// envelopes received in answer to prev (parse them all, including any the
// receive pipeline later rejects). SinceTS moves to the newest ts in the
// page and each stream's mark moves to the highest seq the page held for
// it, so the envelopes already received are never sent again, ties on ts
// included. It returns nil when page is empty: nothing more can come.
//
// Raising a mark past a hole gives up filling that hole in this round of
// paging; the next round starts again from [Store.SeqMarks].
func NextHistoryRequest(prev *proto.HistoryRequest, page []*proto.SignedEnvelope) *proto.HistoryRequest {
	if len(page) == 0 {
		return nil
	}
	next := *prev
	marks := make(map[[keyLen + idLen]byte]proto.SeqMark, len(prev.SinceSeqBySender)+len(page))
	for _, m := range prev.SinceSeqBySender {
		marks[markKey(m)] = m
	}
	for _, se := range page {
		next.SinceTS = max(next.SinceTS, se.TS)
		m := proto.SeqMark{Sender: se.From, Epoch: se.Epoch, LastSeq: se.Seq}
		k := markKey(m)
		if old, ok := marks[k]; !ok || old.LastSeq < se.Seq {
			marks[k] = m
		}
	}
	next.SinceSeqBySender = make([]proto.SeqMark, 0, len(marks))
	for _, m := range marks {
		next.SinceSeqBySender = append(next.SinceSeqBySender, m)
	}
	slices.SortFunc(next.SinceSeqBySender, compareMarks)
	if len(next.SinceSeqBySender) > proto.MaxArrayElements {
		// Keep the marks of the streams in this page: they are what
		// moves paging forward.
		keep := next.SinceSeqBySender[:0]
		inPage := make(map[[keyLen + idLen]byte]bool, len(page))
		for _, se := range page {
			inPage[markKey(proto.SeqMark{Sender: se.From, Epoch: se.Epoch})] = true
		}
		for _, m := range next.SinceSeqBySender {
			if inPage[markKey(m)] || len(keep) < proto.MaxArrayElements-len(inPage) {
				keep = append(keep, m)
			}
		}
		next.SinceSeqBySender = keep
	}
	return &next
}

func markKey(m proto.SeqMark) [keyLen + idLen]byte {
	var k [keyLen + idLen]byte
	copy(k[:], m.Sender[:])
	copy(k[keyLen:], m.Epoch[:])
	return k
}
