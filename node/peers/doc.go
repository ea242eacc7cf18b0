// Package peers holds the connection management of a node: where each
// member can be dialled and how its addresses were learnt (the address
// book), how dials are spread and backed off, which link of a duplicate
// pair survives, and which peers are held back for refusing us or for
// not reading.
//
// The node holds a Service: the peer table, and the admission of links
// into it (the accept loop, the duplicate-link rule, the retirement of a
// pair's loser with the frames it still held). The service calls the
// node through Host (roster lookup, admit, link up, frame, link down)
// and the dial scheduler through Dialer; it counts no metric, the node
// does from what it is told. The peer table's mutex (Table) is the
// node's "peers mutex": methods named …Locked expect it held.
package peers
