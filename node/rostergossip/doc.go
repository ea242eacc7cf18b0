// Package rostergossip keeps the current roster of a node and follows
// its changes (PROTOCOL.md §6, §4.4).
//
// A [Keeper] holds the roster every part of the node reads (an atomic
// pointer: [Keeper.Current] takes no lock) and applies updates one at a
// time under the roster's acceptance rules, whether a peer pushed them
// (a roster frame), the operator published one (meshctl roster publish,
// SIGHUP) or an invite's redemption made one. It persists an update in
// the home, pushes it on to every other link, answers a peer behind it
// with the current roster, and closes the links of the members it
// removed. It also follows key rotations: at start it switches this
// node to the pending key the roster lists ([Keeper.AdoptPendingKey]);
// after an update it notes the members moved to new keys and tells the
// operator when the roster lists this node's own new key; and its loop
// ([Keeper.Run]) closes the links of previous keys when their grace
// window ends.
//
// It sees the node through [Host]: its key, sending a frame, the peer
// table's part of an update and of a retirement, closing a link, the
// consequences of an update elsewhere in the node, and where it counts
// and logs. It imports proto, roster, node/home, node/apierr and
// node/peers, never node.
package rostergossip
