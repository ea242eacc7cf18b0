package history

import (
	"github.com/meshd/meshd/proto"

	"log/slog"
	"time"
)

// Config tunes a [Store]. A zero field takes its value from
// [DefaultConfig], so callers set only what they mean to change. The
// config is read-only once the store is open.
type Config struct {
	// MaxBytes caps the size of the database file (bbolt's MaxSize). A
	// write that would grow the file past it fails with [ErrQuota]; deletes
	// keep working, so pruning frees room again. Default 1 GiB: the
	// retention defaults (72 h or 10,000 messages per channel, at most
	// 256 KiB per body) stay far below it for a few dozen channels, and a
	// runaway sender cannot fill the disk.
	MaxBytes int64

	// CommitWindow is how long the writer waits for more requests before
	// it commits a batch, once it has seen concurrent writers. One commit
	// costs two fdatasyncs (about 0.4 ms here); 2 ms turns a burst of
	// envelopes into a handful of commits while adding little to the
	// delivery latency. The writer stops waiting early when no request
	// has arrived for an eighth of the window (every writer is already in
	// the batch), and a lone sequential writer never waits: a batch of one
	// that follows a batch of one is committed at once. A negative value
	// disables the window: each batch then holds what queued up during
	// the previous commit.
	CommitWindow time.Duration

	// MaxBatch caps the requests committed in one transaction. Default
	// 1024: large enough to amortise the fsyncs at the 17k envelopes/s
	// that signature checking allows, small enough to keep one
	// transaction's dirty pages (about 1 KiB per envelope) in a few MiB.
	MaxBatch int

	// SeenCacheSize is how many (from, id) pairs the in-memory dedupe set
	// in front of bbolt holds. Default 65,536 (a few MiB): several minutes
	// of traffic at full speed, so live duplicates, which arrive within
	// seconds through other peers, never reach the disk.
	SeenCacheSize int

	// SeenMaxAge is how long [Store.PruneSeen] keeps dedupe entries,
	// counted from the envelope's ts. Default 144 h, twice the default
	// retention: a pruned envelope that a peer still holds and offers
	// again during history sync is recognised and not stored again.
	SeenMaxAge time.Duration

	// MaxQueuePerPeer bounds each peer's store-and-forward queue. Default
	// 10,000, the per-channel retention count: a long absence fits, and a
	// peer that never returns cannot grow the store without bound.
	// Enqueue refuses more with [ErrQueueFull]; nothing is dropped silently.
	MaxQueuePerPeer int

	// MaxSenderBytes and MaxSenderEnvelopes bound what one sender's
	// stored DMs, Requests and Responses may take, in wire bytes and in
	// envelopes. [Store.Deliver] refuses a peer-addressed envelope past
	// either ([OverBudget]); retention gives the room back. Defaults
	// 256 MiB and 50,000: a quarter of the default MaxBytes, so three
	// members flooding at once still leave room for everyone else, and
	// far above what an agent sends in the 72 h DMs are kept (50,000 is
	// one every 5 s for three days). Channel Messages are bounded by the
	// channel's retention (fair by sender, see [Store.Prune]) and by the
	// node's per-sender channel rate instead.
	MaxSenderBytes     int64
	MaxSenderEnvelopes int

	// SeqReserve is how many sequence numbers a [SendCounter] reserves
	// per destination with one durable write. Default 64: one commit per
	// 64 sends to a destination, and after a crash receivers see a gap of
	// at most 63 numbers.
	SeqReserve uint64

	// MaxPendingSeqs bounds the runs of out-of-order sequence numbers
	// remembered per (sender, destination, epoch) stream, that is its
	// holes: a hole followed by any number of later arrivals is one run.
	// When a stream exceeds it, its lowest gap is declared lost and the
	// contiguous run moves past it. Default 1024: room for many holes at
	// once while catch-up fills them, while a sender that skips numbers
	// (every other one, say) cannot make the store remember without bound.
	MaxPendingSeqs int

	// PruneChunk caps the deletions of one retention transaction. Default
	// 1000: each chunk rides in one writer batch and stays a few ms long,
	// so pruning never stalls deliveries.
	PruneChunk int

	// LockTimeout is how long Open waits for the file lock held by another
	// process. Default 1 s: long enough for a restarting daemon to release
	// it, short enough to report a second daemon at once.
	LockTimeout time.Duration

	// InboxPruned, if set, is called after retention commits the removal
	// of envelopes that had inbox items, with those items: the mailbox
	// mirror removes their files. It runs on the pruning goroutine.
	InboxPruned func([]PrunedItem)
	// Self is this node's key: retention reports its own envelopes to
	// InboxPruned as well (PrunedItem.Sent), with or without inbox items.
	Self proto.PubKey

	// Now is the clock. Default time.Now; tests substitute their own.
	Now func() time.Time

	// Logger receives debug and warning messages. Default: discard.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults described on each [Config] field.
func DefaultConfig() Config {
	return Config{
		MaxBytes:           1 << 30,
		CommitWindow:       2 * time.Millisecond,
		MaxBatch:           1024,
		SeenCacheSize:      1 << 16,
		SeenMaxAge:         144 * time.Hour,
		MaxQueuePerPeer:    10000,
		MaxSenderBytes:     256 << 20,
		MaxSenderEnvelopes: 50000,
		SeqReserve:         64,
		MaxPendingSeqs:     1024,
		PruneChunk:         1000,
		LockTimeout:        time.Second,
		Now:                time.Now,
		Logger:             slog.New(slog.DiscardHandler),
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxBytes <= 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.CommitWindow < 0 {
		c.CommitWindow = 0
	} else if c.CommitWindow == 0 {
		c.CommitWindow = d.CommitWindow
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.SeenCacheSize <= 0 {
		c.SeenCacheSize = d.SeenCacheSize
	}
	if c.SeenMaxAge <= 0 {
		c.SeenMaxAge = d.SeenMaxAge
	}
	if c.MaxQueuePerPeer <= 0 {
		c.MaxQueuePerPeer = d.MaxQueuePerPeer
	}
	if c.MaxSenderBytes <= 0 {
		c.MaxSenderBytes = d.MaxSenderBytes
	}
	if c.MaxSenderEnvelopes <= 0 {
		c.MaxSenderEnvelopes = d.MaxSenderEnvelopes
	}
	if c.SeqReserve == 0 {
		c.SeqReserve = d.SeqReserve
	}
	if c.MaxPendingSeqs <= 0 {
		c.MaxPendingSeqs = d.MaxPendingSeqs
	}
	if c.PruneChunk <= 0 {
		c.PruneChunk = d.PruneChunk
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = d.LockTimeout
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}
