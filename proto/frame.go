package proto

import (
	"fmt"

	"github.com/google/uuid"
)

// FrameType is the first byte of every application frame on a link
// (keepalives are the transport's own business and never reach here). The
// rest of the frame is the payload. ONLY APPEND TO THIS LIST.
type FrameType uint8

const (
	// FrameEnvelope carries one wire envelope.
	FrameEnvelope FrameType = 1
	// FrameRoster carries a signed roster document.
	FrameRoster FrameType = 2
	// FramePolicy carries a signed channel policy document.
	FramePolicy FrameType = 3
	// FramePeers carries a [PeerList] (peer exchange).
	FramePeers FrameType = 4
	// FrameGoodbye carries a UTF-8 reason; the sender closes after it.
	FrameGoodbye FrameType = 5
	// FramePolicyDigest carries a [PolicyDigest]: the channel policy
	// versions the sender holds, so the peer can push newer ones.
	FramePolicyDigest FrameType = 6
	// FrameAck carries an [Ack]: peer-addressed envelopes (DMs, Requests,
	// Responses) the sender of the frame has durably stored, so the peer
	// that sent them may drop them from its store-and-forward queue.
	FrameAck FrameType = 7
)

func (t FrameType) String() string {
	switch t {
	case FrameEnvelope:
		return "envelope"
	case FrameRoster:
		return "roster"
	case FramePolicy:
		return "policy"
	case FramePeers:
		return "peers"
	case FrameGoodbye:
		return "goodbye"
	case FramePolicyDigest:
		return "policy-digest"
	case FrameAck:
		return "ack"
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}

// MaxFrameSize bounds one application frame (type byte included). The
// transport chunks frames larger than one Noise message.
const MaxFrameSize = MaxEnvelopeSize + 1

// PeerInfo is one roster member's reachable addresses, as shared in peer
// exchange. Wire: {0: bstr(32) key, 1: [* text address]}.
type PeerInfo struct {
	Key   PubKey   `cbor:"0,keyasint"`
	Addrs []string `cbor:"1,keyasint"`
}

// PeerList is the payload of FramePeers. Wire: {0: [* PeerInfo]}.
type PeerList struct {
	Peers []PeerInfo `cbor:"0,keyasint"`

	// IgnoredAddrs counts the addresses [ParsePeerList] left out because
	// they fail [CheckListenAddr]. It never travels.
	IgnoredAddrs int `cbor:"-"`
}

// ParsePeerList decodes a peer-exchange payload strictly. Each entry keeps
// only the addresses that pass [CheckListenAddr]; the others are counted
// in IgnoredAddrs.
func ParsePeerList(b []byte) (*PeerList, error) {
	var l PeerList
	if err := Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("peer list: %w", err)
	}
	for i, p := range l.Peers {
		if len(p.Addrs) > MaxListenAddrs {
			return nil, fmt.Errorf("peer list: %w: %d addresses for one peer", ErrMalformed, len(p.Addrs))
		}
		var n int
		l.Peers[i].Addrs, n = filterListenAddrs(p.Addrs)
		l.IgnoredAddrs += n
	}
	return &l, nil
}

// PolicyVersion names one channel policy version in a [PolicyDigest].
// Wire: {0: bstr(16) channel id, 1: version}.
type PolicyVersion struct {
	Channel [16]byte `cbor:"0,keyasint"`
	Version uint64   `cbor:"1,keyasint"`
}

// PolicyDigest is the payload of FramePolicyDigest. Wire: {0: [* PolicyVersion]}.
type PolicyDigest struct {
	Policies []PolicyVersion `cbor:"0,keyasint"`
}

// Ack is the payload of FrameAck. Wire: {0: [* bstr(16) envelope id]}.
type Ack struct {
	IDs []uuid.UUID `cbor:"0,keyasint"`
}

// ParseAck decodes an ack payload strictly.
func ParseAck(b []byte) (*Ack, error) {
	var a Ack
	if err := UnmarshalCanonical(b, &a); err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	return &a, nil
}
