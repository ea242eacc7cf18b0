// Package cards keeps the members' agent cards (docs/PROTOCOL.md §19):
// each member may publish one signed card saying what it serves. A
// [Book] holds the newest card of every member in the home's cards
// folder, takes card frames from peers (parse, membership, version,
// signature, then at most one card a second per signer: the rest are
// held back and the newest taken when the second has passed), floods a
// card it takes to every other link, sends every card held to a peer
// whose link comes up, and signs and publishes this node's own card.
//
// It sees the node through [Host]: the roster, this node's identity and
// signature, the links and sending a frame, the lookup and naming of
// members, presence, and where it counts and logs refusals. It imports
// proto, roster, node/api, node/apierr and node/peers, never node.
package cards
