package node

import (
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

// maxDeliveryRecords bounds the delivery records read at once.
const maxDeliveryRecords = outbound.MaxDeliveryRecords
