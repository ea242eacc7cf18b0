package node

import "github.com/meshd/meshd/node/peers"

// peerHost is the node as node/peers sees it: the peers.Host and
// peers.Dialer that connection management calls. A conversion of
// *Node, so that these methods are not the node's own API.
type peerHost Node

var _ peers.Dialer = (*peerHost)(nil)
