package history

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/meshd/meshd/proto"
)

// markRec is the tracking state of one (sender, destination, epoch)
// stream. Every number in [lo, hi] has arrived; the numbers outside that
// run that have arrived are kept as maximal runs in the seq-runs bucket
// (pending numbers in runs runs).
type markRec struct {
	lo, hi   uint64 // the contiguous run that holds the first number seen
	min, max uint64 // lowest and highest number seen
	pending  uint64 // numbers seen outside [lo, hi]
	lost     uint64 // numbers declared lost (Config.MaxPendingSeqs, ForgetGaps)
	updated  int64  // Unix ms of the last arrival
	runs     uint64 // runs of the pending numbers: the holes above or below
}

const markRecLen = 8 * 8

// markRecLenV2 is the stream record of schema 2, without runs.
const markRecLenV2 = 7 * 8

func (m *markRec) encode() []byte { return m.put(make([]byte, markRecLen)) }

// put writes the record into b, which must be markRecLen bytes, and
// returns b.
func (m *markRec) put(b []byte) []byte {
	for i, v := range [...]uint64{m.lo, m.hi, m.min, m.max, m.pending, m.lost, uint64(m.updated), m.runs} {
		binary.BigEndian.PutUint64(b[i*8:], v)
	}
	return b
}

func decodeMark(b []byte) (markRec, error) {
	var m markRec
	if len(b) != markRecLen {
		return m, fmt.Errorf("%w: stream record of %d bytes", ErrCorrupt, len(b))
	}
	m = decodeMarkV2(b)
	m.runs = binary.BigEndian.Uint64(b[7*8:])
	return m, nil
}

// decodeMarkV2 decodes the first markRecLenV2 bytes of b, which holds at
// least that many.
func decodeMarkV2(b []byte) markRec {
	f := func(i int) uint64 { return binary.BigEndian.Uint64(b[i*8:]) }
	return markRec{lo: f(0), hi: f(1), min: f(2), max: f(3), pending: f(4), lost: f(5), updated: int64(f(6))}
}

func seqKey(sk []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(bytes.Clone(sk), seq)
}

// A pending run is stored as stream key | first(8) → last(8): the numbers
// first..last have arrived, outside the stream's run and not adjacent to
// it or to another pending run (runs are kept maximal).

// runAt returns the pending run of stream sk whose first number is the
// greatest not above seq, if any. It walks the stream's runs forward from
// the first (at most Config.MaxPendingSeqs of them): a bbolt cursor's
// Prev and Last, in a transaction that has deleted keys of the bucket,
// returned wrong neighbours here and left a run beside the stream's run
// unmerged (TestPendingRunsRandomOrder).
func runAt(c *bolt.Cursor, sk []byte, seq uint64) (first, last uint64, ok bool) {
	for k, v := c.Seek(sk); k != nil && bytes.HasPrefix(k, sk); k, v = c.Next() {
		if len(k) != len(sk)+8 || len(v) != 8 {
			continue
		}
		f := binary.BigEndian.Uint64(k[len(sk):])
		if f > seq {
			break
		}
		first, last, ok = f, binary.BigEndian.Uint64(v), true
	}
	return first, last, ok
}

// putRun stores the pending run first..last of stream sk.
func (w *wtx) putRun(sk []byte, first, last uint64) error {
	return w.runs().Put(seqKey(sk, first), binary.BigEndian.AppendUint64(nil, last))
}

// observeSeq records the arrival of seq in the stream (from, d, epoch)
// and keeps the run [lo, hi] as long as the arrivals allow.
func (w *wtx) observeSeq(d proto.Destination, from proto.PubKey, epoch uuid.UUID, seq uint64) error {
	// The key buffer is reused across calls; nothing may keep a slice of it
	// past the end: the keys made below are their own (seqKey copies sk).
	w.key = appendDestKey(w.key[:0], d)
	w.key = append(append(w.key, from[:]...), epoch[:]...)
	sk := w.key
	v := w.marks().Get(sk)
	if v == nil {
		m := markRec{lo: seq, hi: seq, min: seq, max: seq, updated: w.now.UnixMilli()}
		return w.marks().Put(sk, m.put(w.value(markRecLen)))
	}
	m, err := decodeMark(v)
	if err != nil {
		return err
	}
	m.updated = w.now.UnixMilli()
	m.min, m.max = min(m.min, seq), max(m.max, seq)
	switch {
	case seq >= m.lo && seq <= m.hi:
		// A number already in the run: a duplicate or a reused number.
	case m.hi < math.MaxUint64 && seq == m.hi+1:
		m.hi = seq
		if err := w.absorbUp(sk, &m); err != nil {
			return err
		}
	case m.lo > 0 && seq == m.lo-1:
		m.lo = seq
		if err := w.absorbDown(sk, &m); err != nil {
			return err
		}
	default:
		if err := w.addPending(sk, &m, seq); err != nil {
			return err
		}
		if m.runs > uint64(w.s.cfg.MaxPendingSeqs) {
			if err := w.giveUpGap(sk, &m); err != nil {
				return err
			}
		}
	}
	return w.marks().Put(sk, m.put(w.value(markRecLen)))
}

// addPending adds seq, outside the stream's run and not adjacent to it,
// to its pending runs: it joins the run that ends just below it and the
// one that starts just above it, or starts a run of its own.
func (w *wtx) addPending(sk []byte, m *markRec, seq uint64) error {
	c := w.runs().Cursor()
	first, last, below := runAt(c, sk, seq)
	if below && seq <= last {
		return nil // already pending
	}
	joinBelow := below && last == seq-1
	var aboveLast uint64
	joinAbove := false
	if seq < math.MaxUint64 {
		target := seqKey(sk, seq+1)
		if k, v := c.Seek(target); bytes.Equal(k, target) && len(v) == 8 {
			joinAbove, aboveLast = true, binary.BigEndian.Uint64(v)
		}
	}
	m.pending++
	switch {
	case joinBelow && joinAbove:
		if err := w.runs().Delete(seqKey(sk, seq+1)); err != nil {
			return err
		}
		m.runs--
		return w.putRun(sk, first, aboveLast)
	case joinBelow:
		return w.putRun(sk, first, seq)
	case joinAbove:
		if err := w.runs().Delete(seqKey(sk, seq+1)); err != nil {
			return err
		}
		return w.putRun(sk, seq, aboveLast)
	}
	m.runs++
	return w.putRun(sk, seq, seq)
}

// absorbUp extends the run over the pending run that starts just above
// it (pending runs are maximal, so there is at most one).
func (w *wtx) absorbUp(sk []byte, m *markRec) error {
	if m.runs == 0 || m.hi == math.MaxUint64 {
		return nil
	}
	k := seqKey(sk, m.hi+1)
	v := w.runs().Get(k)
	if len(v) != 8 {
		return nil
	}
	return w.takeRun(k, m, m.hi+1, binary.BigEndian.Uint64(v))
}

// absorbDown extends the run over the pending run that ends just below
// it.
func (w *wtx) absorbDown(sk []byte, m *markRec) error {
	if m.runs == 0 || m.lo == 0 {
		return nil
	}
	first, last, ok := runAt(w.runs().Cursor(), sk, m.lo-1)
	if !ok || last != m.lo-1 {
		return nil
	}
	return w.takeRun(seqKey(sk, first), m, first, last)
}

// takeRun moves the pending run first..last (key k), adjacent to the
// stream's run, into it.
func (w *wtx) takeRun(k []byte, m *markRec, first, last uint64) error {
	n := last - first + 1
	if last < first || n > m.pending || m.runs == 0 {
		return fmt.Errorf("%w: pending run %d..%d against %d pending numbers in %d runs", ErrCorrupt, first, last, m.pending, m.runs)
	}
	if err := w.runs().Delete(k); err != nil {
		return err
	}
	m.lo, m.hi = min(m.lo, first), max(m.hi, last)
	m.pending -= n
	m.runs--
	return nil
}

// giveUpGap declares the lowest gap above the run lost (or, with nothing
// above it, the highest gap below it) and extends the run over it and
// the pending run beyond it.
func (w *wtx) giveUpGap(sk []byte, m *markRec) error {
	c := w.runs().Cursor()
	k, v := c.Seek(seqKey(sk, m.hi))
	if k != nil && bytes.HasPrefix(k, sk) && len(k) == len(sk)+8 && len(v) == 8 {
		first := binary.BigEndian.Uint64(k[len(sk):])
		m.lost += first - m.hi - 1
		m.hi = first - 1
		return w.takeRun(bytes.Clone(k), m, first, binary.BigEndian.Uint64(v))
	}
	if first, last, ok := runAt(c, sk, m.lo); ok && last < m.lo {
		m.lost += m.lo - last - 1
		m.lo = last + 1
		return w.takeRun(seqKey(sk, first), m, first, last)
	}
	return fmt.Errorf("%w: stream records %d pending numbers in %d runs but none are stored", ErrCorrupt, m.pending, m.runs)
}

// SeqRange is an inclusive range of sequence numbers.
type SeqRange struct{ From, To uint64 }

// Stream is what the store knows of one sender's numbering towards one
// destination in one epoch.
type Stream struct {
	Sender proto.PubKey
	Epoch  uuid.UUID
	// First..Last is the contiguous run that holds the first number seen:
	// every number in it has arrived. Last is the mark to send in a
	// HistoryRequest.
	First, Last uint64
	// Min and Max are the lowest and highest numbers seen.
	Min, Max uint64
	// Count is how many distinct numbers have arrived.
	Count uint64
	// Missing lists the holes between Min and Max, lowest first, at most
	// [MaxMissingRanges] of them.
	Missing []SeqRange
	// Lost counts numbers given up on (Config.MaxPendingSeqs or
	// [Store.ForgetGaps]).
	Lost uint64
	// Updated is the time of the last arrival.
	Updated time.Time
}

// Contiguous reports whether every number from the first seen to the
// highest has arrived.
func (s *Stream) Contiguous() bool { return s.Min == s.First && s.Max == s.Last }

// MaxMissingRanges bounds Stream.Missing.
const MaxMissingRanges = 64

// Gaps returns every tracked stream towards d, ordered by (sender,
// epoch), with its holes. A stream is contiguous when its numbers have no
// holes since the first one seen; history sync may fill the holes.
func (s *Store) Gaps(d proto.Destination) ([]Stream, error) {
	var out []Stream
	dk := destKey(d)
	err := s.view(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		c := tx.Bucket(bucketMarks).Cursor()
		for k, v := c.Seek(dk); k != nil && bytes.HasPrefix(k, dk); k, v = c.Next() {
			m, err := decodeMark(v)
			if err != nil {
				return err
			}
			st := streamOf(k[len(dk):], m)
			if m.pending > 0 {
				st.Missing = missing(runs, k, m)
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

func streamOf(senderEpoch []byte, m markRec) Stream {
	var st Stream
	copy(st.Sender[:], senderEpoch)
	copy(st.Epoch[:], senderEpoch[keyLen:])
	st.First, st.Last, st.Min, st.Max = m.lo, m.hi, m.min, m.max
	st.Count = m.hi - m.lo + 1 + m.pending
	st.Lost = m.lost
	st.Updated = timeOf(m.updated)
	return st
}

// missing walks the pending runs of a stream in order and reports the
// holes between them and the run.
func missing(runs *bolt.Bucket, sk []byte, m markRec) []SeqRange {
	var out []SeqRange
	prev, have := uint64(0), false // the last number of the run before
	note := func(first, last uint64) {
		if have && first > prev+1 && len(out) < MaxMissingRanges {
			out = append(out, SeqRange{prev + 1, first - 1})
		}
		prev, have = last, true
	}
	c := runs.Cursor()
	runDone := false
	for k, v := c.Seek(sk); k != nil && bytes.HasPrefix(k, sk) && len(out) < MaxMissingRanges; k, v = c.Next() {
		if len(k) != len(sk)+8 || len(v) != 8 {
			continue
		}
		first := binary.BigEndian.Uint64(k[len(sk):])
		if !runDone && first > m.hi {
			note(m.lo, m.hi)
			runDone = true
		}
		note(first, binary.BigEndian.Uint64(v))
	}
	if !runDone {
		note(m.lo, m.hi)
	}
	return out
}

// SeqMarks returns, for each (sender, epoch) stream seen in channel, the
// last number of its contiguous run: the marks of a HistoryRequest, sorted
// by (sender, epoch) as proto requires. A mark claims every number up to
// it; numbers below the first one this node saw are not covered by it
// (see the package documentation on catch-up).
//
// At most proto.MaxArrayElements marks fit a request. When the channel
// holds more streams, the marks are chosen in this order: streams with
// holes first (a stream without its mark is asked for by time, and a
// hole older than the request's SinceTS would never be filled), then the
// most recently updated; and no sender gets more than
// [MaxMarksPerSender] of them while another sender's streams are left
// out. One member's flood of fresh epochs thus takes at most
// MaxMarksPerSender places from the others' streams.
func (s *Store) SeqMarks(channel uuid.UUID) ([]proto.SeqMark, error) {
	var all []markChoice
	dk := destKey(proto.ToChannel(channel))
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMarks).Cursor()
		for k, v := c.Seek(dk); k != nil && bytes.HasPrefix(k, dk); k, v = c.Next() {
			m, err := decodeMark(v)
			if err != nil {
				return err
			}
			st := streamOf(k[len(dk):], m)
			all = append(all, markChoice{
				mark:    proto.SeqMark{Sender: st.Sender, Epoch: st.Epoch, LastSeq: st.Last},
				updated: m.updated,
				gap:     m.pending > 0,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return chooseMarks(all, proto.MaxArrayElements), nil
}

// MaxMarksPerSender is how many marks one sender's streams may take in a
// request while other senders' streams are left out ([Store.SeqMarks]).
// A member starts a new epoch only when it loses its state (a new
// install, a repair), so a real sender has a few streams in a channel.
const MaxMarksPerSender = 16

// markChoice is a stream's mark with what [chooseMarks] ranks it by.
type markChoice struct {
	mark    proto.SeqMark
	updated int64 // Unix ms of the stream's last arrival
	gap     bool  // the stream has holes
}

// chooseMarks returns at most limit of the marks, sorted by (sender,
// epoch): all of them if they fit; otherwise streams with holes first,
// then the most recently updated, at most MaxMarksPerSender per sender
// before the remaining places go to the rest in the same order.
func chooseMarks(all []markChoice, limit int) []proto.SeqMark {
	if len(all) > limit {
		slices.SortStableFunc(all, func(a, b markChoice) int {
			if a.gap != b.gap {
				if a.gap {
					return -1
				}
				return 1
			}
			if c := cmp.Compare(b.updated, a.updated); c != 0 {
				return c
			}
			return compareMarks(a.mark, b.mark)
		})
		keep := make([]markChoice, 0, limit)
		var over []markChoice
		perSender := map[proto.PubKey]int{}
		for _, c := range all {
			if perSender[c.mark.Sender] >= MaxMarksPerSender {
				over = append(over, c)
				continue
			}
			perSender[c.mark.Sender]++
			if keep = append(keep, c); len(keep) == limit {
				break
			}
		}
		for _, c := range over {
			if len(keep) == limit {
				break
			}
			keep = append(keep, c)
		}
		all = keep
	}
	slices.SortFunc(all, func(a, b markChoice) int { return compareMarks(a.mark, b.mark) })
	out := make([]proto.SeqMark, len(all))
	for i, c := range all {
		out[i] = c.mark
	}
	return out
}

func compareMarks(a, b proto.SeqMark) int {
	if c := bytes.Compare(a.Sender[:], b.Sender[:]); c != 0 {
		return c
	}
	return bytes.Compare(a.Epoch[:], b.Epoch[:])
}

// ForgetGaps gives up on the holes in the streams towards d whose sender
// give reports true (every stream when give is nil): each run is extended
// to the highest number seen and the skipped numbers are counted as lost.
// Call it when every peer that could hold the missing numbers has been
// asked and none did, so later requests stop asking for them. It returns
// how many streams had holes given up.
func (s *Store) ForgetGaps(d proto.Destination, give func(sender proto.PubKey) bool) (int, error) {
	dk := destKey(d)
	given := 0
	err := s.write(func(w *wtx) (error, error) {
		given = 0
		var streams [][]byte
		c := w.marks().Cursor()
		for k, v := c.Seek(dk); k != nil && bytes.HasPrefix(k, dk); k, v = c.Next() {
			m, err := decodeMark(v)
			if err != nil {
				return nil, err
			}
			if m.pending == 0 || len(k) < len(dk)+keyLen {
				continue
			}
			if give != nil && !give(proto.PubKey(k[len(dk):len(dk)+keyLen])) {
				continue
			}
			streams = append(streams, bytes.Clone(k))
		}
		for _, sk := range streams {
			m, err := decodeMark(w.marks().Get(sk))
			if err != nil {
				return nil, err
			}
			m.lost += (m.max - m.min + 1) - (m.hi - m.lo + 1) - m.pending
			m.lo, m.hi, m.pending, m.runs = m.min, m.max, 0, 0
			if err := deletePrefix(w.runs(), sk); err != nil {
				return nil, err
			}
			if err := w.marks().Put(sk, m.encode()); err != nil {
				return nil, err
			}
		}
		given = len(streams)
		return nil, nil
	}, nil)
	return given, err
}

// pruneStreams removes the streams towards destinations with prefix dk
// whose last arrival is older than cutoff, with their pending numbers.
func (w *wtx) pruneStreams(dk []byte, cutoff int64) error {
	var old [][]byte
	c := w.marks().Cursor()
	for k, v := c.Seek(dk); k != nil && bytes.HasPrefix(k, dk); k, v = c.Next() {
		m, err := decodeMark(v)
		if err != nil {
			return err
		}
		if m.updated < cutoff {
			old = append(old, bytes.Clone(k))
		}
	}
	for _, sk := range old {
		if err := deletePrefix(w.runs(), sk); err != nil {
			return err
		}
		if err := w.marks().Delete(sk); err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes every key in b that starts with prefix.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
