// Package node composes meshd. A [Node] holds connection management (a
// node/peers Service: the peer table, admission of links, one link per
// peer pair, the listeners, mDNS discovery and the link settings, the
// accept, dial, discovery and peer-exchange loops, seeds, link moves and
// refusals), and owns what the links carry: the frame dispatch,
// retention and the feeding of the mailbox (a node/mailbox Box: the
// mirror, its loop and the outbox, through its adapter in
// mailboxhost.go). The service calls the node through peers.Host
// (node/peerhost.go). The receive side (node/rx: the pipeline of one
// envelope, parse, verify, authorize, commit to the history store, then
// the consumers; its commit stage; history sync, node/syncer, which it
// feeds and which feeds it through its history stage), the send side
// (node/outbound: signing and numbering our envelopes, fan-out, the
// store-and-forward queue and its flush, acks, delivery records, reply
// depth, one final answer, the received requests), the current roster,
// its gossip, key rotations and name index (node/rostergossip), channel
// administration: the channel set and subscriptions, policies, their
// versions, the per-sender channel quota and the block list
// (node/chanadmin), agent cards (node/cards), this node's own presence
// (node/ownpresence), the workers' claims on the inbox (node/claims),
// invites, knocks, adoption and the pending list (one join.Join), the
// doctor's checks (node/doctor), the inbox and history queries with the
// inbox's wake-ups and the event stream (node/inboxq) and what the node
// reports of itself (node/status) are components the node holds and
// reaches through its frames, admission, link-up, receive pipeline,
// commit stage and inbox; they call the node through their Host
// interfaces (rxhost.go, outboundhost.go, rosterhost.go, chanadminhost.go,
// cardshost.go, ownpresencehost.go, claimshost.go, joinhost.go,
// doctorhost.go, inboxqhost.go, statushost.go).
// The node serves no local face itself: meshd composes the control API
// that meshctl talks to over the owner-only Unix socket in the home
// (node/control's Serve, its types in node/api), the status page and the
// metrics endpoint, each over a [Backend]: the node and the components
// that answer their own routes.
//
// Trust flows from one place: the admin-signed roster. A link is admitted
// only when the peer's identity (proved in the Noise handshake) is a
// member of the current roster; roster updates are accepted only under the
// rules of package roster, persisted, and pushed on to every linked peer,
// and members that an update removes are disconnected at once
// (node/rostergossip, which holds the roster every part reads).
package node
