// Package join brings nodes into an org and this node into another
// (docs/PROTOCOL.md §14.10, §14.11). [Invites] are the single-use invites
// this node made (`meshctl invite`): their file in the home, and the
// admission of a joiner that presents one, which signs and applies the
// roster update adding it (or, under a quorum, writes it for the other
// admins). [Knocks] is the knock in both directions: as responder it
// answers knocks and lists the non-members this node refused in the
// pending list (`meshctl roster pending`); as a fresh node it knocks at
// seeds and mDNS peers of another org, and adopts the roster one of them
// offers when its user named the seed or confirmed an admin (`meshctl
// adopt`); [FinishAdoption] then moves the home to the adopted org.
//
// Both see the node through [Host]; the package imports proto, roster,
// transport, node/api, node/apierr, node/home and node/peers, never node.
package join
