package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"
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
// it, so the envelopes already received are not sent again, ties on ts
// included. It returns nil when page is empty: nothing more can come.
//
// A page is in time order, and a sender numbers an envelope before it
// stamps its time, so two sent at once can cross: a page cut between
// them holds number n+1 and not n, which comes in a later page. Raising
// the mark past n would skip it for the rest of the paging (the store
// keeps the hole, but only a later round would ask for it). So a
// stream whose numbers in the page are not contiguous from its mark (from
// the lowest it held, if unmarked) keeps its mark at the end of that
// contiguous run, and the next page sends the few above it again with the
// missing one (see nextMark). Where that does not move the mark on, or
// would send more than half a page again, the mark rises past the hole,
// and the next round fills it from [Store.SeqMarks].
func NextHistoryRequest(prev *proto.HistoryRequest, page []*proto.SignedEnvelope) *proto.HistoryRequest {
	if len(page) == 0 {
		return nil
	}
	next := *prev
	marks := make(map[[keyLen + idLen]byte]proto.SeqMark, len(prev.SinceSeqBySender)+len(page))
	for _, m := range prev.SinceSeqBySender {
		marks[markKey(m)] = m
	}
	held := make(map[[keyLen + idLen]byte]map[uint64]bool)
	for _, se := range page {
		next.SinceTS = max(next.SinceTS, se.TS)
		k := markKey(proto.SeqMark{Sender: se.From, Epoch: se.Epoch})
		if held[k] == nil {
			held[k] = map[uint64]bool{}
		}
		held[k][se.Seq] = true
	}
	for k, seqs := range held {
		old, marked := marks[k]
		m := proto.SeqMark{Sender: proto.PubKey(k[:keyLen]), Epoch: uuid.UUID(k[keyLen:])}
		m.LastSeq = nextMark(old.LastSeq, marked, seqs, len(page))
		if !marked || old.LastSeq < m.LastSeq {
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

// nextMark returns a stream's mark for the next page: the end of the
// contiguous run of seqs from the mark (or, unmarked, from the lowest
// of seqs) when the page left a hole above it, so the next page fills
// it; otherwise, or when that run does not move the mark on or leaves
// more than half of a page of pageLen envelopes to send again, the
// highest of seqs.
func nextMark(mark uint64, marked bool, seqs map[uint64]bool, pageLen int) uint64 {
	top := uint64(0)
	low := uint64(math.MaxUint64)
	for n := range seqs {
		top, low = max(top, n), min(low, n)
	}
	run := mark
	if !marked {
		run = low
	}
	for run < top && seqs[run+1] {
		run++
	}
	if run == top || (marked && run == mark) {
		return top
	}
	again := 0
	for n := range seqs {
		if n > run {
			again++
		}
	}
	if 2*again > pageLen {
		return top
	}
	return run
}

func markKey(m proto.SeqMark) [keyLen + idLen]byte {
	var k [keyLen + idLen]byte
	copy(k[:], m.Sender[:])
	copy(k[keyLen:], m.Epoch[:])
	return k
}
