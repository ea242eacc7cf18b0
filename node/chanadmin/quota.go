package chanadmin

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
)

// Per-sender channel quota (docs/SECURITY.md "Channel floods and the
// mailbox"): each member's channel Messages arriving here pass two token
// buckets, one of messages (ChannelSenderRate a minute, holding
// ChannelSenderBurst) and one of wire bytes (ChannelSenderBytesPerHour an
// hour, holding as much). Messages that come by history sync take their
// message tokens from a bucket of their own, which holds
// historyBurstFactor times as many, so that a node back from an absence
// catches up a full channel (10,000 by default) from one sender at once;
// the byte bucket is shared. A Message past either is refused as
// drop.quota before it is stored, mirrored or wakes a reader. Tokens are taken only
// once the signature is checked, so nobody can spend another member's.
// Buckets are kept per roster member, so the map is bounded by the
// roster (at most 4,096) and forgets senders whose bucket is full again.

// chanQuota holds the buckets. It is safe for concurrent use.
type chanQuota struct {
	perMin   float64 // messages a minute; 0 no limit
	burst    float64 // messages
	perHour  float64 // bytes an hour; 0 no limit
	mu       sync.Mutex
	buckets  map[proto.PubKey]*quotaBucket
	refused  map[proto.PubKey]uint64 // refusals since start, by sender
	lastPurg time.Time
}

type quotaBucket struct {
	msgs, hist, bytes float64 // live message, history message and byte tokens
	at                time.Time
}

// historyBurstFactor is how many times ChannelSenderBurst the history
// bucket holds: 5 × 2,000 = 10,000, a default channel's retention count.
const historyBurstFactor = 5

// maxQuotaSenders bounds the refusal tally kept for status.
const maxQuotaSenders = 4096

func newChanQuota(perMin, burst int, bytesPerHour int64) *chanQuota {
	return &chanQuota{perMin: float64(perMin), burst: float64(max(burst, 1)), perHour: float64(bytesPerHour),
		buckets: map[proto.PubKey]*quotaBucket{}, refused: map[proto.PubKey]uint64{}}
}

// allow takes one message of size bytes from from's buckets (the history
// message bucket if history), and reports whether it had them; a refused
// message takes nothing.
func (q *chanQuota) allow(from proto.PubKey, size int, history bool, now time.Time) bool {
	if q.perMin <= 0 && q.perHour <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.buckets[from]
	if b == nil {
		b = &quotaBucket{msgs: q.burst, hist: q.burst * historyBurstFactor, bytes: q.perHour, at: now}
		q.buckets[from] = b
	}
	if dt := now.Sub(b.at); dt > 0 {
		b.msgs = min(q.burst, b.msgs+dt.Minutes()*q.perMin)
		b.hist = min(q.burst*historyBurstFactor, b.hist+dt.Minutes()*q.perMin)
		b.bytes = min(q.perHour, b.bytes+dt.Hours()*q.perHour)
		b.at = now
	}
	tokens := &b.msgs
	if history {
		tokens = &b.hist
	}
	okMsgs := q.perMin <= 0 || *tokens >= 1
	okBytes := q.perHour <= 0 || b.bytes >= float64(size)
	if !okMsgs || !okBytes {
		if _, ok := q.refused[from]; ok || len(q.refused) < maxQuotaSenders {
			q.refused[from]++
		}
		return false
	}
	*tokens--
	b.bytes -= float64(size)
	q.purgeLocked(now)
	return true
}

// purgeLocked forgets, once a minute, buckets that have filled up again:
// a new bucket starts full, so forgetting one changes nothing.
func (q *chanQuota) purgeLocked(now time.Time) {
	if now.Sub(q.lastPurg) < time.Minute {
		return
	}
	q.lastPurg = now
	for k, b := range q.buckets {
		dt := now.Sub(b.at)
		refill := dt.Minutes() * q.perMin
		if b.msgs+refill >= q.burst && b.hist+refill >= q.burst*historyBurstFactor && b.bytes+dt.Hours()*q.perHour >= q.perHour {
			delete(q.buckets, k)
		}
	}
}

// refusals returns the refusals by sender since start.
func (q *chanQuota) refusals() map[proto.PubKey]uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[proto.PubKey]uint64, len(q.refused))
	for k, v := range q.refused {
		out[k] = v
	}
	return out
}

// OverQuota reports whether se, a verified channel Message (from
// history sync if history), is past its sender's channel quota; it logs
// the refusal at most once per 10 s per sender. The caller counts the
// drop.
func (a *Admin) OverQuota(se *proto.SignedEnvelope, history bool, now time.Time) bool {
	if se.To.Kind != proto.DestChannel || a.quota.allow(se.From, len(se.Raw), history, now) {
		return false
	}
	if ok, suppressed := a.host.QuotaLogAllowed(se.From.Fingerprint()); ok {
		a.log.Warn("channel message refused: its sender passed its channel quota on this node",
			"from", se.From.Fingerprint(), "id", se.ID, "channel", se.To.Channel, "size", len(se.Raw), "history", history,
			"rate_per_min", a.cfg.SenderRate, "burst", a.cfg.SenderBurst,
			"bytes_per_hour", a.cfg.SenderBytesPerHour, "suppressed", suppressed)
	}
	return true
}

// QuotaRefused lists the senders refused by their channel quota, most
// first, at most 20, named by r.
func (a *Admin) QuotaRefused(r *roster.Roster) []api.QuotaRefusal {
	var out []api.QuotaRefusal
	for k, v := range a.quota.refusals() {
		q := api.QuotaRefusal{Key: k, Fingerprint: k.Fingerprint(), Refused: v}
		if m, ok := r.Member(k); ok {
			q.Name = m.Name
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b api.QuotaRefusal) int {
		if a.Refused != b.Refused {
			return cmp.Compare(b.Refused, a.Refused)
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
	return out[:min(len(out), 20)]
}
