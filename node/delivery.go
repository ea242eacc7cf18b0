package node

import (
	"time"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/outbound"
)

// The delivery failures' counters, by the state the envelope ended in.
var (
	famDeliveryFailed = newFamily("meshd_deliveries_failed_total", "Kept DMs, requests and responses of this node that will never be delivered (its sender got a delivery_failed item), by state.", "state")

	cTxFailedExpired = newCounter("tx.failed.expired", famDeliveryFailed, "expired")
	cTxFailedRefused = newCounter("tx.failed.refused", famDeliveryFailed, "refused")
)

// countDeliveryFailed counts "tx.failed.<state>". Only expired and
// refused records come here; another state would be counted by name.
func countDeliveryFailed(m *Metrics, st history.DeliveryState) {
	switch st {
	case history.DeliveryExpired:
		m.inc(cTxFailedExpired)
	case history.DeliveryRefused:
		m.inc(cTxFailedRefused)
	default:
		m.Inc("tx.failed." + st.String())
	}
}

// Delivery state of what this node sends (docs/PROTOCOL.md §16.6): the
// store keeps a record per sent DM, Request and Response, and per channel
// Message; a kept envelope that expires or is refused unacknowledged
// becomes a delivery_failed item in our own inbox.

// onDeliveryFailed runs after the store made failures durable: it counts
// them, logs them, wakes inbox waiters and hands the items to the mirror
// and the event stream.
func (n *Node) onDeliveryFailed(rs []history.DeliveryRecord) {
	now := time.Now()
	for _, r := range rs {
		countDeliveryFailed(n.metrics, r.State)
		n.logRL.warn(n.log, "a message of ours was not delivered", r.Peer.Fingerprint(), "delivery_"+r.State.String(),
			"id", r.ID, "kind", r.Kind, "to", r.Peer.Fingerprint(), "state", r.State, "reason", r.Reason)
		st, err := n.store.Get(n.id.Pub, r.ID)
		if err != nil {
			n.log.Warn("delivery failure item", "id", r.ID, "err", err)
			continue
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		n.onInbox(inboxDelivery{se: se, prio: history.PriorityHigh, wakes: true, at: now})
	}
	n.inbox.notify(len(rs) > 0)
}

// maxDeliveryRecords bounds the delivery records read at once.
const maxDeliveryRecords = outbound.MaxDeliveryRecords
