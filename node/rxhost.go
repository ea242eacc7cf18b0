package node

import (
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/node/syncer"
	"github.com/meshd/meshd/proto"
)

// The receive pipeline's counters (node/rx).
var (
	famReceived   = newFamily("meshd_envelopes_received_total", "Envelopes that entered the receive pipeline, before any check.")
	famDelivered  = newFamily("meshd_envelopes_delivered_total", "Envelopes that passed every check, by kind.", "kind")
	famCommits    = newFamily("meshd_rx_commits_total", "Batches committed by the receive commit stage.")
	famInboxItems = newFamily("meshd_inbox_items_total", "Items added to the inbox.")
	famSyncHeld   = newFamily("meshd_sync_envelopes_already_held_total", "Envelopes in catch-up pages that this node already held (not counted as drops).")

	cInboxItems = newCounter("inbox.items", famInboxItems)

	// rxCounters maps each counter of node/rx to its metric.
	rxCounters = [rx.NumCounters]counter{
		rx.Received:        newCounter("rx.envelopes", famReceived),
		rx.Presence:        newCounter("rx.presence", famDelivered, "presence"),
		rx.PresenceBytes:   newEvent("rx.presence_bytes"),
		rx.Commits:         newCounter("rx.commits", famCommits),
		rx.InboxItems:      cInboxItems,
		rx.SyncAlreadyHeld: newCounter("sync.already_held", famSyncHeld),
	}
	// cRxDelivered counts "rx.delivered.<kind>" by envelope kind.
	cRxDelivered = newKindVec("rx.delivered.", famDelivered)
)

// rxHost is the node as node/rx sees it.
type rxHost struct{ n *Node }

// newRx makes the receive side of n, with its history sync, over the
// components openState made; observe (nil: none) sees every envelope
// that reaches the inbox, rounds (nil: none) every catch-up round done.
func newRx(n *Node, observe func(*proto.SignedEnvelope, time.Time), rounds func(syncer.Round)) *rx.Pipeline {
	return rx.New(n.life.ctx, rxHost{n}, rx.Config{
		Self: n.id.Pub, Store: n.store, Roster: n.roster, Presence: n.own.Table(), Clock: n.doctor,
		Chans: n.chans, Acks: n.out, Sync: syncParams(n, rounds), Log: n.log, RateLog: n.logRL.l,
		SenderStoreBytes: n.cfg.SenderStoreBytes, SenderStoreEnvelopes: n.cfg.SenderStoreEnvelopes,
		Observe: observe,
	})
}

func (h rxHost) Count(c rx.Counter, d uint64)           { h.n.metrics.add(rxCounters[c], d) }
func (h rxHost) CountDrop(r rx.Drop)                    { h.n.metrics.inc(cDrop.at(r)) }
func (h rxHost) CountDelivered(k proto.Kind)            { h.n.metrics.inc(cRxDelivered.of(k)) }
func (h rxHost) AdmitAttachments(b []rx.Item) []rx.Item { return h.n.admitAttachments(b) }
func (h rxHost) Notify(wake bool)                       { h.n.q.Notify(wake) }

// Delivered queues a new inbox item for the mailbox mirror and the event
// stream, and starts its attachments' eager fetch.
func (h rxHost) Delivered(se *proto.SignedEnvelope, prio history.Priority, wakes, fromHistory bool, at time.Time) {
	mailboxHost(h).delivered(inboxDelivery{se: se, prio: prio, wakes: wakes, fromHistory: fromHistory, at: at})
	h.n.attach.onDelivered(se, at)
}
