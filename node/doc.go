// Package node composes meshd. A [Node] holds its configuration,
// identity, home, metrics, logs, run state and history store, and the
// components that own the rest, each in a package of its own that calls
// the node back through a small Host interface, implemented by an
// adapter here:
//
//   - connection management (node/peers: the peer table, admission of
//     links, one link per peer pair, the listeners, mDNS discovery and
//     the link settings, the accept, dial, discovery and peer-exchange
//     loops, seeds, link moves and refusals; peerhost.go);
//   - the receive side (node/rx: the pipeline of one envelope, parse,
//     verify, authorize, commit to the history store, then the
//     consumers; its commit stage; history sync, node/syncer, which it
//     feeds and which feeds it through its history stage; rxhost.go);
//   - the send side (node/outbound: signing and numbering our envelopes,
//     fan-out, the store-and-forward queue and its flush, acks, delivery
//     records, reply depth, one final answer, the received requests;
//     outboundhost.go);
//   - the current roster, its gossip, key rotations and name index
//     (node/rostergossip; rosterhost.go);
//   - channel administration: the channel set and subscriptions,
//     policies, their versions, the per-sender channel quota and the
//     block list (node/chanadmin; chanadminhost.go);
//   - agent cards (node/cards; cardshost.go), this node's own presence
//     and the presence table (node/ownpresence; ownpresencehost.go);
//   - invites, knocks, adoption and the pending list (node/join;
//     joinhost.go), the doctor's checks and what it noticed
//     (node/doctor; doctorhost.go);
//   - the inbox and history queries with the inbox's wake-ups, the
//     event stream and the workers' claims on its items (node/inboxq,
//     which holds node/claims; inboxqhost.go);
//   - the mailbox: the mirror, its loop and the outbox (a node/mailbox
//     Box; mailboxhost.go).
//
// What stays with the node is the composition: [New] and [Node.Close],
// the frame dispatch (links.go), the admission of a handshake, what a
// link coming up sends, retention and the attachments (attach*.go).
// Tests' seams are handed by newNode to the components they observe;
// the node keeps none.
//
// The node serves no local face itself: meshd composes the control API
// that meshctl talks to over the owner-only Unix socket in the home
// (node/control's Serve, its types in node/api), the status page and the
// metrics endpoint, each over a [Backend]: the node and the components
// that answer their own routes, with what the node reports of itself
// (node/status; statushost.go), a view Backend makes over the owners'
// state.
//
// Trust flows from one place: the admin-signed roster. A link is admitted
// only when the peer's identity (proved in the Noise handshake) is a
// member of the current roster; roster updates are accepted only under the
// rules of package roster, persisted, and pushed on to every linked peer,
// and members that an update removes are disconnected at once
// (node/rostergossip, which holds the roster every part reads).
package node
