package history

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// Bucket names. The layout is described in the package documentation.
var (
	bucketMeta    = []byte("meta")
	bucketEnv     = []byte("env")
	bucketChanIdx = []byte("chan")
	bucketDirIdx  = []byte("direct")
	bucketCounts  = []byte("counts")
	bucketSeen    = []byte("seen")
	bucketSeenAge = []byte("seen-age")
	bucketMarks   = []byte("marks")
	bucketRuns    = []byte("seq-runs")
	bucketQueue   = []byte("queue")
	bucketQueueID = []byte("queue-id")
	bucketQCount  = []byte("queue-count")
	bucketInbox   = []byte("inbox")
	bucketInboxT  = []byte("inbox-time")
	bucketSenders = []byte("senders")
	// Added in place, without a schema change: older builds ignore them.
	bucketDelivery  = []byte("delivery")
	bucketDeliveryT = []byte("delivery-time")
	bucketDeliveryA = []byte("delivery-acks")
	bucketReqOut    = []byte("requests-out")

	allBuckets = [][]byte{
		bucketMeta, bucketEnv, bucketChanIdx, bucketDirIdx, bucketCounts,
		bucketSeen, bucketSeenAge, bucketMarks, bucketRuns, bucketQueue,
		bucketQueueID, bucketQCount, bucketInbox, bucketInboxT, bucketSenders,
		bucketDelivery, bucketDeliveryT, bucketDeliveryA, bucketReqOut,
	}
)

// Keys in the meta bucket.
var (
	metaSchema   = []byte("schema")
	metaCounters = []byte("counters")
	metaBackfill = []byte("backfill")
)

// schemaVersion is the on-disk layout version stored under meta/schema.
// Version 1 (meshd up to 9798b00) keyed envelopes and inbox state by id
// alone; version 2 keys them by (id, sender) and adds the senders bucket;
// version 3 keeps a stream's pending sequence numbers as runs (seq-runs)
// instead of one key per number (seqs), so Config.MaxPendingSeqs bounds
// holes, not the numbers that arrived above a hole. [Open] upgrades an
// older store in place (see migrate.go).
const schemaVersion = 3

// countDirect is the counts key of envelopes not addressed to a channel.
var countDirect = []byte{0}

// present is the value of index entries whose key says everything. bbolt
// reports a nil value for nested buckets, so index values are never empty.
var present = []byte{1}

const (
	idLen    = 16
	keyLen   = 32
	tsLen    = 8
	seenKLen = keyLen + idLen
	// envKLen: id | sender, the key of an envelope and of its inbox state.
	envKLen = idLen + keyLen
	// chanKeyLen: channel | ts | sender | epoch | seq | id.
	chanKeyLen = idLen + tsLen + keyLen + idLen + 8 + idLen
)

// putTS encodes a Unix-millisecond time so that byte order is numeric order,
// negative values included.
func putTS(b []byte, ts int64) { binary.BigEndian.PutUint64(b, uint64(ts)^(1<<63)) }

// appendTS appends ts encoded as putTS encodes it.
func appendTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
}

func getTS(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// destKey is a fixed-length, prefix-free key for a destination: the kind
// byte, then the channel id, the peer key, or SHA-256 of the org id.
func destKey(d proto.Destination) []byte {
	return appendDestKey(make([]byte, 0, 1+keyLen), d)
}

// appendDestKey appends destKey(d) to dst.
func appendDestKey(dst []byte, d proto.Destination) []byte {
	dst = append(dst, byte(d.Kind))
	switch d.Kind {
	case proto.DestChannel:
		return append(dst, d.Channel[:]...)
	case proto.DestPeer:
		return append(dst, d.Peer[:]...)
	default:
		h := sha256.Sum256([]byte(d.Org))
		return append(dst, h[:]...)
	}
}

// appendDest encodes a destination completely (org ids included) for
// records that must give it back.
func appendDest(b []byte, d proto.Destination) []byte {
	b = append(b, byte(d.Kind))
	switch d.Kind {
	case proto.DestChannel:
		b = append(b, d.Channel[:]...)
	case proto.DestPeer:
		b = append(b, d.Peer[:]...)
	default:
		b = append(b, byte(len(d.Org)))
		b = append(b, d.Org...)
	}
	return b
}

// readDest decodes what appendDest wrote and returns the rest.
func readDest(b []byte) (proto.Destination, []byte, error) {
	var d proto.Destination
	if len(b) < 1 {
		return d, nil, errShort
	}
	d.Kind, b = proto.DestKind(b[0]), b[1:]
	switch d.Kind {
	case proto.DestChannel:
		if len(b) < idLen {
			return d, nil, errShort
		}
		copy(d.Channel[:], b)
		return d, b[idLen:], nil
	case proto.DestPeer:
		if len(b) < keyLen {
			return d, nil, errShort
		}
		copy(d.Peer[:], b)
		return d, b[keyLen:], nil
	case proto.DestOrg:
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return d, nil, errShort
		}
		n := int(b[0])
		d.Org = string(b[1 : 1+n])
		return d, b[1+n:], nil
	}
	return d, nil, fmt.Errorf("%w: destination kind %d", ErrCorrupt, d.Kind)
}

var errShort = fmt.Errorf("%w: record too short", ErrCorrupt)

// Envelope record (bucket env, key id):
//
//	version(1)=1 | flags(1): bit0 from history | received ms(8) | kind(1) |
//	ts(8) | ttl(4) | seq(8) | epoch(16) | from(32) | destination | raw
const envRecVersion = 1

func encodeEnv(se *proto.SignedEnvelope, received int64, fromHistory bool) []byte {
	b := make([]byte, 0, 2+8+1+8+4+8+idLen+keyLen+1+keyLen+len(se.Raw))
	var flags byte
	if fromHistory {
		flags |= 1
	}
	b = append(b, envRecVersion, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(received))
	b = append(b, byte(se.Kind))
	b = binary.BigEndian.AppendUint64(b, uint64(se.TS))
	b = binary.BigEndian.AppendUint32(b, se.TTL)
	b = binary.BigEndian.AppendUint64(b, se.Seq)
	b = append(b, se.Epoch[:]...)
	b = append(b, se.From[:]...)
	b = appendDest(b, se.To)
	return append(b, se.Raw...)
}

// decodeEnv parses an envelope record. Raw aliases b: copy it before the
// transaction ends if it must outlive it. The sender is read from the
// record (the key's sender part repeats it).
func decodeEnv(id uuid.UUID, b []byte) (Stored, error) {
	var s Stored
	const fixed = 2 + 8 + 1 + 8 + 4 + 8 + idLen + keyLen
	if len(b) < fixed {
		return s, errShort
	}
	if b[0] != envRecVersion {
		return s, fmt.Errorf("%w: envelope record version %d", ErrCorrupt, b[0])
	}
	s.ID = id
	s.FromHistory = b[1]&1 != 0
	s.Received = timeOf(int64(binary.BigEndian.Uint64(b[2:])))
	s.Kind = proto.Kind(b[10])
	s.TS = int64(binary.BigEndian.Uint64(b[11:]))
	s.TTL = binary.BigEndian.Uint32(b[19:])
	s.Seq = binary.BigEndian.Uint64(b[23:])
	copy(s.Epoch[:], b[31:])
	copy(s.From[:], b[31+idLen:])
	d, rest, err := readDest(b[fixed:])
	if err != nil {
		return s, err
	}
	s.To = d
	s.Raw = rest
	s.Size = len(rest)
	return s, nil
}

// chanKey builds the per-channel time index key.
func chanKey(channel uuid.UUID, ts int64, from proto.PubKey, epoch uuid.UUID, seq uint64, id uuid.UUID) []byte {
	return appendChanKey(make([]byte, 0, chanKeyLen), channel, ts, from, epoch, seq, id)
}

// appendChanKey appends chanKey(channel, ts, from, epoch, seq, id) to dst.
func appendChanKey(dst []byte, channel uuid.UUID, ts int64, from proto.PubKey, epoch uuid.UUID, seq uint64, id uuid.UUID) []byte {
	dst = append(dst, channel[:]...)
	dst = appendTS(dst, ts)
	dst = append(dst, from[:]...)
	dst = append(dst, epoch[:]...)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return append(dst, id[:]...)
}

// chanEntry is a decoded channel index key.
type chanEntry struct {
	ts     int64
	stream []byte // sender | epoch, aliases the key
	seq    uint64
	id     uuid.UUID
}

// envKey returns the key of the entry's envelope.
func (e *chanEntry) envKey() []byte {
	return append(append(make([]byte, 0, envKLen), e.id[:]...), e.stream[:keyLen]...)
}

func parseChanKey(k []byte) chanEntry {
	var e chanEntry
	e.ts = getTS(k[idLen:])
	e.stream = k[idLen+tsLen : idLen+tsLen+keyLen+idLen]
	e.seq = binary.BigEndian.Uint64(k[idLen+tsLen+keyLen+idLen:])
	copy(e.id[:], k[idLen+tsLen+keyLen+idLen+8:])
	return e
}

// envKey is the key of an envelope, and of its inbox state: its id, then
// its sender. Two senders' envelopes that share an id are two envelopes;
// the id first keeps keys in time order (UUIDv7) and puts every envelope
// with one id side by side.
func envKey(id uuid.UUID, from proto.PubKey) [envKLen]byte {
	var k [envKLen]byte
	copy(k[:], id[:])
	copy(k[idLen:], from[:])
	return k
}

// appendEnvKey appends envKey(id, from) to dst.
func appendEnvKey(dst []byte, id uuid.UUID, from proto.PubKey) []byte {
	return append(append(dst, id[:]...), from[:]...)
}

func directKey(ts int64, id uuid.UUID, from proto.PubKey) []byte {
	return appendDirectKey(make([]byte, 0, tsLen+envKLen), ts, id, from)
}

// appendDirectKey appends directKey(ts, id, from) to dst.
func appendDirectKey(dst []byte, ts int64, id uuid.UUID, from proto.PubKey) []byte {
	return appendEnvKey(appendTS(dst, ts), id, from)
}

func seenKey(from proto.PubKey, id uuid.UUID) [seenKLen]byte {
	var k [seenKLen]byte
	copy(k[:], from[:])
	copy(k[keyLen:], id[:])
	return k
}

// appendSeenAgeKey appends the seen-age key of sk, ts | sk, to dst.
func appendSeenAgeKey(dst []byte, ts int64, sk [seenKLen]byte) []byte {
	return append(appendTS(dst, ts), sk[:]...)
}

func countKey(d *proto.Destination) []byte {
	if d.Kind == proto.DestChannel {
		return d.Channel[:]
	}
	return countDirect
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
