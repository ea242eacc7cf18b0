package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
)

// The counters counted in this file.
var (
	famRetentionFail  = newFamily("meshd_retention_failures_total", "History retention runs that failed.")
	famRetentionPrune = newFamily("meshd_retention_pruned_total", "Entries removed by history retention, by what.", "what")
	famRetentionRuns  = newFamily("meshd_retention_runs_total", "History retention runs.")

	cRetentionFailed           = newCounter("retention.failed", famRetentionFail)
	cRetentionPrunedDeliveries = newCounter("retention.pruned.deliveries", famRetentionPrune, "deliveries")
	cRetentionRuns             = newCounter("retention.runs", famRetentionRuns)
	cRetentionPrunedChannel    = newCounter("retention.pruned.channel", famRetentionPrune, "channel")
	cRetentionPrunedDirect     = newCounter("retention.pruned.direct", famRetentionPrune, "direct")
	cRetentionPrunedSeen       = newCounter("retention.pruned.seen", famRetentionPrune, "seen")
	cRetentionExpiredQueued    = newCounter("retention.expired.queued", famRetentionPrune, "queued")
)

// Retention: a background goroutine applies, every RetentionInterval,
// each channel's retention (its policy's age and count, whichever keeps
// fewer; at least ArchiveRetention and ArchiveRetentionMessages on an
// archive node), DirectRetention to DMs, Requests and Responses, and
// expires the dedupe set and the store-and-forward queues. The store
// deletes in small transactions that ride in its writer's batches, so
// deliveries go on while it prunes. Channel count retention is fair by
// sender and spares unread inbox items, and age counts from min(ts,
// receipt) ([history.Store.Prune]); the mailbox file of every inbox item
// pruned goes with it (removePrunedFiles).

// retention returns how long and how many messages of a channel we keep.
func (n *Node) retention(p *channel.Policy, archive bool) (time.Duration, int) {
	return n.cfg.retention(p, archive)
}

// defaultPolicy stands for a channel whose policy we no longer hold: the
// default retention applies to what the store still has of it.
var defaultPolicy = &channel.Policy{}

// retentionLoop prunes every RetentionInterval, and once soon after start,
// since a node that was down for days has the most to prune.
func (n *Node) retentionLoop() {
	defer n.life.wg.Done()
	iv := n.cfg.RetentionInterval
	first := time.NewTimer(min(iv, 5*time.Second))
	defer first.Stop()
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-n.life.ctx.Done():
			return
		case now := <-first.C:
			n.pruneOnce(now)
		case now := <-t.C:
			n.pruneOnce(now)
		}
	}
}

// pruneReport says what one retention pass removed.
type pruneReport struct {
	Channel int // channel envelopes
	Direct  int // DMs, Requests and Responses
	Seen    int // dedupe entries
	Queued  int // expired store-and-forward entries
	Failed  int // steps that failed (logged)
}

// pruneOnce applies retention once, as of now.
func (n *Node) pruneOnce(now time.Time) pruneReport {
	var rep pruneReport
	archive := isArchive(n.Roster(), n.id.Pub)
	fail := func(what string, err error) {
		rep.Failed++
		n.metrics.inc(cRetentionFailed)
		n.log.Error("retention: "+what, "err", err)
	}
	done := map[uuid.UUID]bool{}
	prune := func(id uuid.UUID, p *channel.Policy) {
		if n.life.ctx.Err() != nil {
			return
		}
		age, count := n.retention(p, archive)
		k, err := n.store.Prune(id, age, count, now)
		rep.Channel += k
		if err != nil {
			fail("prune channel "+id.String(), err)
		}
		done[id] = true
	}
	for _, p := range n.chans.Set().All() {
		prune(p.ID, p)
	}
	if st, err := n.store.Stats(); err != nil {
		fail("stats", err)
	} else {
		for id := range st.Channels {
			if !done[id] {
				prune(id, defaultPolicy)
			}
		}
	}
	if n.life.ctx.Err() != nil {
		return rep
	}
	var err error
	if rep.Direct, err = n.store.PruneDirect(n.cfg.DirectRetention, now); err != nil {
		fail("prune direct messages", err)
	}
	if rep.Seen, err = n.store.PruneSeen(now); err != nil {
		fail("prune dedupe set", err)
	}
	if rep.Queued, err = n.store.ExpireQueues(now); err != nil {
		fail("expire store-and-forward queues", err)
	}
	if d, err := n.out.PruneDeliveries(now); err != nil {
		fail("prune delivery records", err)
	} else {
		n.metrics.add(cRetentionPrunedDeliveries, uint64(d))
	}
	n.attach.prune(now)
	n.metrics.inc(cRetentionRuns)
	n.metrics.add(cRetentionPrunedChannel, uint64(rep.Channel))
	n.metrics.add(cRetentionPrunedDirect, uint64(rep.Direct))
	n.metrics.add(cRetentionPrunedSeen, uint64(rep.Seen))
	n.metrics.add(cRetentionExpiredQueued, uint64(rep.Queued))
	if rep.Channel+rep.Direct+rep.Queued > 0 {
		n.log.Info("retention", "channel_envelopes", rep.Channel, "direct", rep.Direct, "dedupe", rep.Seen, "queued_expired", rep.Queued)
	}
	return rep
}
