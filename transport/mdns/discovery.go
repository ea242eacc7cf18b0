package mdns

import (
	"errors"
	"time"

	"github.com/meshd/meshd/proto"
)

// Peer is one discovered node, as it describes itself. Nothing in it is
// authenticated: dial Addrs and let the handshake check Key.
type Peer struct {
	// Key is the node's identity from TXT "key".
	Key proto.PubKey
	// Org is the node's org id from TXT "org".
	Org string
	// RosterVersion is the roster version the node holds, from TXT "rv";
	// 0 when it did not say.
	RosterVersion uint64
	// ProtoVersion is the node's link protocol version from TXT "pv".
	// Nodes with another version than [proto.ProtocolVersion] fail the
	// handshake, so callers usually skip them.
	ProtoVersion int
	// Addrs are dialable link addresses, e.g. "tcp://10.0.0.2:7000".
	Addrs []string
	// Host is the name the node advertises its addresses under, for logs.
	Host string
	// Seen is when this report was made.
	Seen time.Time
}

// Discovery reports peers found on the local network.
type Discovery interface {
	// Peers delivers a peer when it is first seen, when its addresses or
	// roster version change, and periodically as a refresh. It is closed
	// by Close. An implementation may drop a report while the channel is
	// full, but then reports that peer again later, so a slow reader
	// loses time, never peers.
	Peers() <-chan Peer
	// Close stops advertising and browsing and waits for the goroutines
	// it owns. It is safe to call more than once.
	Close() error
}

// Advertiser is a [Discovery] that also advertises this node.
type Advertiser interface {
	Discovery
	// SetRosterVersion changes the roster version this node advertises.
	SetRosterVersion(v uint64) error
}

var (
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("mdns: discovery closed")
	// ErrNoInterface means no network interface fits mDNS: none is up,
	// multicast-capable, not loopback and with an IPv4 address.
	ErrNoInterface = errors.New("mdns: no usable network interface")
	// ErrNoMulticast means the mDNS group can be joined in neither IPv4
	// nor IPv6, typically in a network namespace with no default route, no
	// 224.0.0.0/4 route and IPv6 disabled.
	ErrNoMulticast = errors.New("mdns: cannot join the mDNS multicast group")
)

var (
	_ Advertiser = (*MDNS)(nil)
	_ Advertiser = (*MemoryMember)(nil)
)
