// Package peers is the connection management of a node: where each
// member can be dialled and how its addresses were learnt (the address
// book), how dials are spread and backed off, which link of a duplicate
// pair survives, which peers are held back for refusing us or for not
// reading, and what the peers are told of each other.
//
// The node holds a Service: the peer table, the admission of links into
// it (the duplicate-link rule, the retirement of a pair's loser with the
// frames it still held), and the loops that fill it, started by
// Service.Start: the accept loops, the dial loop (the static seeds and
// their file, the dial of each member and seed that is due, the move of
// a same-host TCP link to the peer's Unix socket), mDNS discovery, and
// incremental peer exchange (the peer list, what each link was told of
// it, and each link's copy of its peer's list). It answers the frames
// that are its own (peers, peer-update, link-move, goodbye) as the
// node's dispatch hands them over, and refuses, for the transport, the
// peers the node's admission turned away.
//
// The service calls the node through Host: self and roster lookup,
// admit, link up, frame, link down, and what it counts (a Counter per
// event; the node defines the metrics and writes the link logs). The
// peer table's mutex (Table) is the node's "peers mutex": methods named
// …Locked expect it held.
package peers
