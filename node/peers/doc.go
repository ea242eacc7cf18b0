// Package peers holds the connection management of a node: where each
// member can be dialled and how its addresses were learnt (the address
// book), how dials are spread and backed off, which link of a duplicate
// pair survives, and which peers are held back for refusing us or for
// not reading.
//
// It decides; the node acts. The peer table's mutex (Table) is the
// node's "peers mutex": methods named …Locked expect it held. Apart from
// the accept loop (Accept), which hands each admitted link to the node,
// nothing here starts a goroutine, sends a frame other than a link's
// goodbye, or counts a metric: the node does, from what these return.
package peers
