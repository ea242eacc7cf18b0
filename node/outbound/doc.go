// Package outbound is the send side of a node: what this node says and
// what becomes of it. A [Sender] signs and numbers our envelopes (the
// sender counter, docs/PROTOCOL.md §4.4), fans them out to the links
// (node/peers), keeps direct envelopes in the store-and-forward queue
// until the peer acknowledges them and sends the queue again when the
// peer links (§16.1), sends and takes acks, answers the delivery records
// (`meshctl sent`, `meshctl status ID`, §16.6), and holds the local rules
// of sending: the reply depth (docs/AGENTS.md "Loops that end") and one
// final answer per request.
//
// It calls the node through a small [Host]: the roster, the lookups of
// members and channels, the received requests, the attachments, and the
// consumers of what was sent (the mailbox's sent folder, the event
// stream). Refusals of local requests are node/apierr errors.
package outbound
