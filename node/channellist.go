package node

import "github.com/meshd/meshd/node/api"

// ChannelList returns the channels this node holds, with this node's
// subscription state and access, sorted by name (GET /v1/channels).
func (n *Node) ChannelList() []api.Channel {
	out := []api.Channel{}
	for _, p := range n.chans.Set().All() {
		out = append(out, n.chans.ChannelInfo(p))
	}
	return out
}
