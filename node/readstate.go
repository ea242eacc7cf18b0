package node

// onRead runs after the store marked the inbox item k read.
func (n *Node) onRead(k envKey) {}
