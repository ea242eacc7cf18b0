package rx

import (
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
)

// Item is an admitted envelope on its way to the store, or (Env nil) a
// catch-up page whose envelopes were queued before it: the commit stage
// reports the page stored once it has stored what came before.
type Item struct {
	Env  *proto.SignedEnvelope
	Src  Source
	Now  time.Time // admitted
	page *syncer.Batch
}

// commitLoop is the commit stage: it stores admitted envelopes from every
// link in batches (one transaction, one fsync pair per batch), then puts
// them in the inbox: subscribed channels (muted ones at low priority
// without waking), DMs, Requests and Responses.
func (p *Pipeline) commitLoop() {
	batch := make([]Item, 0, maxCommitBatch)
	for {
		batch = batch[:0]
		select {
		case it := <-p.q:
			batch = append(batch, it)
		case <-p.ctx.Done():
			// Store what already arrived, then stop.
			for {
				select {
				case it := <-p.q:
					batch = append(batch, it)
					if len(batch) == maxCommitBatch {
						p.commit(batch)
						batch = batch[:0]
					}
					continue
				default:
				}
				break
			}
			if len(batch) > 0 {
				p.commit(batch)
			}
			return
		}
	fill:
		for len(batch) < maxCommitBatch {
			select {
			case it := <-p.q:
				batch = append(batch, it)
			default:
				break fill
			}
		}
		p.commit(batch)
	}
}

func (p *Pipeline) commit(batch []Item) {
	batch, pages := takePages(batch)
	batch = p.host.AdmitAttachments(batch) // refused past their sender's attachment budget
	if len(batch) == 0 {
		pagesStored(pages)
		return
	}
	ds := make([]history.Delivery, len(batch))
	var blocked []bool // set where a blocked member's envelope left the inbox
	for i, it := range batch {
		prio, wakes, inbox := p.Classify(it.Env)
		if it.Env.Kind == proto.KindRequest && it.Env.Expires().Before(it.Now) {
			// An expired request (from history sync) is never fresh work.
			wakes = false
		}
		if inbox && p.cfg.Chans.Blocked(it.Env.From) {
			// Stored and acknowledged as ever (the member is not told),
			// but kept out of the inbox and the mailbox.
			inbox, wakes = false, false
			if blocked == nil {
				blocked = make([]bool, len(batch))
			}
			blocked[i] = true
		}
		ds[i] = history.Delivery{Env: it.Env, FromHistory: it.Src.History, Inbox: inbox, Priority: prio, Wakes: wakes}
	}
	out, err := p.cfg.Store.Deliver(ds)
	pagesStored(pages)
	if err != nil {
		for _, it := range batch {
			p.Drop(DropStore, it.Env, it.Src, err)
		}
		// Once per interval, not once per message: a full disk fails
		// every commit until there is room.
		p.logAt(slog.LevelError, "store envelopes", "", DropStore.String(), "count", len(batch), "err", err,
			"hint", "the envelopes are not acknowledged, so their senders keep them and send them again; if the disk is full, free space on the file system of the home (meshctl doctor checks it)")
		return
	}
	p.host.Count(Commits, 1)
	p.stored(batch, ds, out, blocked)
}

// stored acknowledges a committed batch and hands its new inbox items to
// the consumers.
func (p *Pipeline) stored(batch []Item, ds []history.Delivery, out []history.Outcome, blocked []bool) {
	now := time.Now()
	wake := false
	var acks map[*peers.Link][]uuid.UUID
	for i, it := range batch {
		se, d := it.Env, ds[i]
		if out[i] == history.OverBudget {
			// Not stored and not acknowledged: its sender keeps it.
			p.refuseOverBudget(se, it.Src)
			continue
		}
		// Peer-addressed envelopes are acknowledged once durable, even
		// when they were duplicates: the sender keeps them until then.
		if p.cfg.Acks.Ackable(se, it.Src.Link, it.Src.History) {
			if acks == nil {
				acks = map[*peers.Link][]uuid.UUID{}
			}
			acks[it.Src.Link] = append(acks[it.Src.Link], se.ID)
		}
		if out[i] != history.Added {
			p.Drop(DropDuplicate, se, it.Src, nil)
			continue
		}
		p.host.CountDelivered(se.Kind)
		if blocked != nil && blocked[i] {
			p.Drop(DropBlocked, se, it.Src, nil)
		}
		if se.Kind == proto.KindRequest {
			p.cfg.Acks.NoteRequest(se)
		}
		p.cfg.Acks.NoteReply(se.ID, se.Message)
		if !d.Inbox {
			continue
		}
		p.host.Count(InboxItems, 1)
		wake = wake || d.Wakes
		if p.cfg.Observe != nil {
			p.cfg.Observe(se, now)
		}
		p.host.Delivered(se, d.Priority, d.Wakes, it.Src.History, now)
	}
	p.host.Notify(wake)
	p.cfg.Acks.SendAcks(acks)
}

// Classify returns the inbox priority and wake rule of an envelope, and
// whether it goes to the inbox at all. The wake rules: a Request or a DM
// wakes at high priority, a Response at normal; a Message of a subscribed
// channel wakes at normal priority, of a muted one it is kept at low
// priority without waking; our own words never reach the inbox.
func (p *Pipeline) Classify(se *proto.SignedEnvelope) (prio history.Priority, wakes, inbox bool) {
	if se.From.Equal(p.cfg.Self) {
		// Our own words, fetched back by catch-up (after a crash or a lost
		// store): history, not mail.
		return 0, false, false
	}
	switch se.Kind {
	case proto.KindRequest:
		return history.PriorityHigh, true, true
	case proto.KindResponse:
		return history.PriorityNormal, true, true
	case proto.KindMessage:
		if se.To.Kind == proto.DestPeer {
			return history.PriorityHigh, true, true
		}
		switch p.cfg.Chans.Subscriptions().Get(se.To.Channel) {
		case channel.Subscribed:
			return history.PriorityNormal, true, true
		case channel.Muted:
			return history.PriorityLow, false, true
		}
	}
	return 0, false, false
}
