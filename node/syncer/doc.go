// Package syncer runs history sync ("History Sync" of the protocol,
// PROTOCOL.md §17) and serves peers' HistoryRequests. The [Syncer] owns
// both; it sees the node through [Host] and its links as
// [github.com/meshd/meshd/node/peers.Link].
// Retention lives in the node (retention.go).
//
// # Catch-up
//
// A round is due for a channel when a link to one of its readers comes
// up, when we start reading it (a policy we can read is learnt, or we
// subscribe or mute after being unsubscribed), and every SyncInterval.
// Triggers are collected for SyncDelay, then one goroutine runs the due
// channels one after the other. For each channel we may read whose
// policy allows history fetch:
//
//  1. The candidates are the linked readers of the channel: the peers
//     that wrote to the channel most recently first, then archive peers
//     and admins as the fallback, then the longest-linked.
//  2. The first candidate is asked with our marks (history.SeqMarks) and
//     since_ts = now - our retention for the channel, with max_messages
//     and max_bytes of one page. After a join (a channel we could not
//     read before) the first successful peer is asked without marks, so
//     that the older part of streams we first saw in the middle is filled
//     too. Each answer with `more` is followed by the request
//     history.NextHistoryRequest builds, sent before the page is checked,
//     so that the peer reads the next page while we verify this one,
//     until a page comes without `more`. Paging that stops early (a
//     timeout, a closed link, MaxRoundPages) resumes there in the next
//     round, and a page that comes after its wait timed out is still
//     used (page.go). A cursor's marks may have passed holes: in
//     a full round, once resumed paging with a peer reaches its last
//     page and holes remain, that peer is asked again from our marks.
//  3. Anything but a channel Message of the channel asked for is
//     dropped (drop.history_foreign); the rest of the page is handed to
//     the node as a [Batch] on [Syncer.Batches]. The node runs every
//     envelope through its receive pipeline with Source{History: true}
//     (every check but the TTL, dedupe by id and per-sender seq
//     tracking) and reports [Batch.Handed]; its commit stage stores them
//     in batches and reports [Batch.Stored]. The syncer never calls
//     into the pipeline.
//  4. Once the page's envelopes are committed, the next candidate is
//     asked with the updated marks, until SyncPeers candidates have
//     answered; further candidates are asked only while history.Gaps
//     reports holes. When every candidate served every page and holes
//     remain, the holes of streams whose sender was among them (or is
//     us, or left) are given up (history.ForgetGaps), so later rounds
//     stop asking for the envelopes above them again; the holes of a
//     sender not linked now are kept until it links, and so are those of
//     a sender whose envelopes in the round's pages the node refused by
//     a quota ([Batch.Refused]), which a later round may take (giveUpGaps).
//
// A sender that lost its state numbers from 1 in a new epoch; tracking is
// per (sender, epoch), so the restart is a new stream, never a replay.
//
// Every wait is on an event: an answer arriving, the commit stage
// storing a page, room in a link's send queue, bounded by a deadline and
// by the syncer's context. Nothing polls.
//
// # Serving
//
// A HistoryRequest from any roster member, addressed to us, is answered
// on the link to its sender: history disabled by the policy, the
// requester not a reader, or an unknown channel get the matching status
// and no messages; otherwise history.Store.History answers within the
// request's limits. Per peer at most HistoryServeConcurrency requests are
// served at once (more are dropped) and pages are paced by a token
// bucket, so no peer can make us read the store in a loop. A request id
// seen before is dropped as a replay.
//
// A HistoryResponse is taken only from the peer we sent the request it
// answers to (InReplyTo), for the channel we asked about; anything else is
// dropped (drop.history_unsolicited). Neither kind reaches the store or
// the inbox.
package syncer
