// Package status is what the node reports of itself to its local faces:
// the status that GET /v1/status and the status page show
// ([Reporter.StatusInfo]), the linked peers ([Reporter.PeerList]) and
// what each says it is linked to ([Reporter.LinkReports]), the counters
// ([Reporter.Counters]) and the read-only views the Prometheus exporter
// scrapes (link counts, queue depths, presence counts, the history
// store's size, the start time).
//
// A [Reporter] reads the history store and the presence table directly
// and the rest of the node through [Host]: the roster, the links, the
// listeners and the mailbox, and the figures other components keep
// (clock skew, channel-quota refusals, blocks). Each view takes the locks
// its state needs and returns copies, so a scrape or a page never holds a
// node lock while it formats output. It imports history, presence,
// roster, proto, transport, node/api, node/mailbox and node/peers, never
// node.
package status
