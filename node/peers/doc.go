// Package peers holds the connection management of a node: where each
// member can be dialled and how its addresses were learnt (the address
// book), how dials are spread and backed off, which link of a duplicate
// pair survives, and which peers are held back for refusing us or for
// not reading.
//
// It decides; the node acts. The node keeps its peer table under its
// peers mutex and calls these rules with that mutex held where a type
// says so; nothing here takes the node's locks, sends a frame or counts
// a metric.
package peers
