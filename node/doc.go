// Package node composes meshd. A [Node] holds connection management (a
// node/peers Service: the peer table, admission of links, one link per
// peer pair, the accept, dial, discovery and peer-exchange loops, seeds,
// link moves and refusals), and owns what the links carry: the frame
// dispatch, roster gossip, the receive pipeline (parse, verify,
// authorize, commit to the history store, then the consumers), history
// sync through node/syncer,
// retention, the feeding of the mailbox mirror (node/mailbox), invites,
// pending joins, knocks and the doctor's checks. The service calls the
// node through peers.Host (node/peerhost.go). Agent cards (node/cards),
// this node's own presence (node/ownpresence), the workers' claims on
// the inbox (node/claims) and the send side (node/outbound: signing and
// numbering our envelopes, fan-out, the store-and-forward queue and its
// flush, acks, delivery records, reply depth, one final answer) are
// components the node holds and reaches through its frames, link-up,
// commit stage and inbox; they call the node through their Host
// interfaces (cardshost.go, ownpresencehost.go, claimshost.go,
// outboundhost.go).
// [New] also starts the control API that meshctl talks to over the
// owner-only Unix socket in the home; its HTTP handlers live in
// node/control, its types in node/api. The control API and the status
// page serve a [Backend]: the node and the components that answer their
// own routes.
//
// Trust flows from one place: the admin-signed roster. A link is admitted
// only when the peer's identity (proved in the Noise handshake) is a
// member of the current roster; roster updates are accepted only under the
// rules of package roster, persisted, and pushed on to every linked peer,
// and members that an update removes are disconnected at once.
package node
