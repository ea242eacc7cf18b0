// Package history is the node's durable store, one bbolt file: envelopes
// by (id, sender), a per-channel time index for history sync, the dedupe set,
// per-(sender, destination, epoch) sequence tracking, our own send
// counters, store-and-forward queues for offline peers, and inbox state.
//
// # Writes
//
// Every write goes through one writer goroutine. It takes what is queued,
// waits up to Config.CommitWindow for more once it has seen concurrent
// writers (it stops early when arrivals pause, and a lone sequential
// writer is committed at once), and commits up to Config.MaxBatch
// requests in one bbolt transaction: one pair of
// fdatasyncs per batch, never per envelope. Each write call blocks until
// its batch is durable and returns its own result, so a caller may
// acknowledge delivery when [Store.Put] returns. If a batch transaction
// fails (a quota overrun, say), it is retried in halves, so the failure
// stays with the request that caused it. db.Batch is not used: its
// closures may run twice, and it gives no control over the window.
//
// Reads run in short read transactions of their own and copy what they
// return; none is held across anything but the database.
//
// The file is opened with Timeout 1 s (a second opener gets [ErrLocked]),
// NoFreelistSync and the map freelist (no freelist written per commit;
// it is rebuilt when the file is opened), and MaxSize = Config.MaxBytes,
// which bbolt enforces when the file grows. A write that would pass it
// fails with [ErrQuota]; deletes reuse free pages and keep working, so
// pruning makes room again. bbolt grows the file in steps (doubling up to
// 16 MiB, then 16 MiB at a time), so the quota bites at that granularity.
//
// # Damage
//
// Before bbolt maps a file, [Open] reads it with pread and walks every
// page bbolt's open touches ([CheckFile]): a file cut short by a full disk
// or a crash, or with overwritten pages, fails with a [*DamageError]
// (matching [ErrCorrupt]) instead of faulting or panicking inside bbolt,
// and a file from a newer format with [ErrNewerFormat]. A new file is made
// under a temporary name and linked into place once its header is
// written, so an empty store file is always damage. `meshctl repair`
// rebuilds a damaged store from the mailbox ([Store.Restore],
// [Store.SetBackfill]).
//
// # Bucket layout
//
// Integers are big-endian. A ts is Unix milliseconds with the sign bit
// flipped, so byte order is time order. A destination key is its kind
// byte followed by the channel id (16 bytes), the peer key (32 bytes) or
// SHA-256 of the org id (32 bytes).
//
//	meta         "schema" → version (8), 3
//	             "counters" → epoch(16) | n(4) | n × (destination | last(8))
//	             "backfill" → 1 (present after meshctl repair, until history sync backfilled every channel)
//	env          id(16) | from(32) → version(1) | flags(1) | received(8) |
//	             kind(1) | ts(8) | ttl(4) | seq(8) | epoch(16) | from(32) |
//	             destination | wire bytes
//	chan         channel(16) | ts(8) | sender(32) | epoch(16) | seq(8) | id(16)
//	             → wire length(4)
//	direct       ts(8) | id(16) | from(32) → 1   envelopes not sent to a channel
//	counts       channel(16) → n(8), and 0x00 → n(8) for the direct ones
//	seen         from(32) | id(16) → ts(8)
//	seen-age     ts(8) | from(32) | id(16) → 1
//	marks        destination key | sender(32) | epoch(16) → stream record
//	             (run first, run last, min, max, pending, lost, updated, runs)
//	seq-runs     destination key | sender(32) | epoch(16) | first(8) → last(8)
//	             maximal runs of numbers that arrived outside a stream's
//	             contiguous run (schema 2 kept one key per number, in seqs)
//	queue        peer(32) | qseq(8) → expires(8) | id(16) | wire bytes
//	queue-id     peer(32) | id(16) → qseq(8)
//	queue-count  peer(32) → n(8)
//	inbox        id(16) | from(32) → priority(1) | flags(1) | delivered(8) |
//	             read at(8)
//	inbox-time   delivered(8) | id(16) | from(32) → 1
//	senders      from(32) → bytes(8) | n(8)   the sender's direct envelopes
//
// # Envelope identity
//
// An envelope is (sender, id): the sender's key and the id it chose. Two
// senders' envelopes that share an id are two envelopes, stored, deduped,
// indexed and put in the inbox apart, so a member cannot suppress another
// member's envelope by reusing its id. Envelope and inbox keys put the id
// first ([Store.GetByID] and [Store.InboxByID] find every sender's
// envelope with an id). The store-and-forward queues hold only this
// node's own envelopes, so (peer, id) there is (peer, this node, id).
// Schema 1 (meshd up to 9798b00) keyed envelopes and inbox state by id
// alone; [Open] upgrades such a store in place, in one transaction.
//
// # Per-sender budget
//
// The senders bucket holds, per sender, the wire bytes and the number of
// its stored envelopes that are not channel Messages (DMs, Requests and
// Responses), updated in the transaction that stores or deletes one.
// [Store.Deliver] refuses such an envelope ([OverBudget]) that would take
// its sender past Config.MaxSenderBytes or Config.MaxSenderEnvelopes;
// retention ([Store.PruneDirect]) gives the room back. A refused envelope
// leaves no dedupe entry: its sender keeps it and re-sends it later.
//
// The channel index carries sender, epoch and seq in its key, so a history
// request is filtered on keys alone, and ties on ts are broken in each
// stream's seq order (see paging below). Its value, the wire length, lets
// the byte budget be checked before an envelope is read.
//
// # Dedupe
//
// [Store.Seen] answers from an in-memory set of the Config.SeenCacheSize
// most recent (from, id) keys, warmed from seen-age at open, and falls
// back to one B-tree lookup. [Store.Put] decides authoritatively inside
// the write transaction. Dedupe entries outlive their envelopes: retention
// removes envelopes, and [Store.PruneSeen] forgets an entry only when its
// envelope's ts is older than Config.SeenMaxAge (default twice the default
// retention), when no copy can come back live (ts + ttl has long passed)
// or through history (every peer has pruned it). That holds only for a
// ttl no longer than SeenMaxAge: the node refuses longer ones at receive.
//
// # Sequence tracking and catch-up
//
// For each (sender, destination, epoch) stream the store keeps the
// contiguous run of numbers that holds the first one seen, extends it as
// numbers arrive in either direction, and lists the numbers that arrived
// outside it. [Store.SeqMarks] reports each stream's run end: a mark in a
// HistoryRequest claims every number up to it, so the responder sends
// the stream's envelopes above it whatever their age (gap fill), and the
// envelopes of unmarked streams from SinceTS on. [Store.Gaps] reports the
// holes; [Store.ForgetGaps] and Config.MaxPendingSeqs give up on holes no
// peer can fill. A node that first saw a stream in the middle holds no
// numbers below its run; a mark cannot say so, so ask without marks (by
// SinceTS alone) to backfill older history.
//
// # History paging
//
// [Store.History] serves a page in (ts, sender, epoch, seq, id) order.
// [NextHistoryRequest] builds the next page's request: SinceTS moves to
// the page's newest ts (ties are included again) and each stream's mark
// moves to the highest seq the page held for it, so what was sent is
// excluded by mark and what was not is still matched. Every page returns
// only new envelopes, so paging ends, and because ties are ordered by seq
// within a stream, no envelope is skipped even when thousands share one
// timestamp. A page cut can fall between two numbers of a stream whose
// ts order crossed (a sender numbers an envelope before it stamps it, so
// two sends at once can cross; or its clock stepped back): the next
// request then keeps the stream's mark below the missing number, so the
// next page fills it, and sends the few above it again. Only when that
// page does not fill it either (the responder lacks it) does the mark
// rise past it; the next catch-up round, which starts from the stored
// marks, asks another peer. Config.MaxPendingSeqs bounds a stream's
// holes, not the numbers that arrive above a hole (schema 3 keeps them
// as runs), so neither paging nor live traffic past a hole gives it up.
//
// # Retention
//
// [Store.Prune] applies a channel's age and count limits (by default 72 h
// or 10,000 messages, whichever keeps fewer), [Store.PruneDirect] ages out
// DMs, Requests and Responses, [Store.PruneSeen] the dedupe set and
// [Store.ExpireQueues] the store-and-forward queues. Each deletes in
// transactions of at most Config.PruneChunk entries that ride in the
// writer's batches. The file never shrinks; [Store.Compact] writes a
// compact copy.
//
// # Send counters
//
// [SendCounter] hands out our own sequence numbers. It reserves
// Config.SeqReserve numbers per destination with one durable write before
// using them, so after a crash it resumes in the same epoch above every
// number it could have used. Only a store without readable counters
// starts a new epoch.
package history
