package proto

import (
	"crypto/sha256"
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
	// FramePeerUpdate carries a [PeerUpdate]: what changed in the
	// sender's peer list since it last told the link, and a digest of the
	// whole list (incremental peer exchange).
	FramePeerUpdate FrameType = 8
	// FrameCard carries one member's signed agent [Card].
	FrameCard FrameType = 9
	// FrameLinkMove carries a [LinkMove]: the two ends of a TCP link
	// agree to replace it with a link over the Unix socket of one of them.
	FrameLinkMove FrameType = 10
	// FramePresenceNote carries one wire envelope of kind Presence whose
	// presence has a note (PROTOCOL.md §14.7). It has a frame type of its
	// own because a node that predates notes drops a Presence with key 2
	// as malformed, while it ignores a frame type it does not know.
	FramePresenceNote FrameType = 11
	// FrameBlobWant carries a [BlobWant]: an ask for chunks of an
	// attachment, naming the envelope that lists it (PROTOCOL.md §13.5).
	FrameBlobWant FrameType = 12
	// FrameBlobChunk carries a [BlobChunk]: an attachment's chunk hash
	// list, one chunk, or a refusal. Links send it in their bulk lane.
	FrameBlobChunk FrameType = 13
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
	case FramePeerUpdate:
		return "peer-update"
	case FrameCard:
		return "card"
	case FrameLinkMove:
		return "link-move"
	case FramePresenceNote:
		return "presence-note"
	case FrameBlobWant:
		return "blob-want"
	case FrameBlobChunk:
		return "blob-chunk"
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

// PeerUpdate is the payload of FramePeerUpdate. Wire:
// {0: [* PeerInfo] set, 1: [* bstr(32) key] removed, 2: bstr(32) digest,
// ? 3: true resync}.
type PeerUpdate struct {
	// Set holds the entries added or changed since the sender's last
	// peers or peer-update frame on the link.
	Set []PeerInfo `cbor:"0,keyasint"`
	// Removed names the entries gone since then.
	Removed []PubKey `cbor:"1,keyasint"`
	// Digest is [PeerDigest] of the sender's whole list as the receiver
	// should now hold it.
	Digest []byte `cbor:"2,keyasint"`
	// Resync asks the receiver to send its whole list in a peers frame:
	// the sender's copy of it does not match the digest.
	Resync bool `cbor:"3,keyasint,omitempty"`

	// IgnoredAddrs counts the addresses [ParsePeerUpdate] left out, as in
	// [PeerList]. It never travels.
	IgnoredAddrs int `cbor:"-"`
}

// PeerDigestSize is the size of a peer-list digest.
const PeerDigestSize = sha256.Size

// PeerEntryHash is the hash of one peer-list entry: SHA-256 of its
// canonical CBOR.
func PeerEntryHash(p PeerInfo) [PeerDigestSize]byte {
	b, err := Marshal(&p)
	if err != nil {
		panic("proto: peer info does not encode: " + err.Error())
	}
	return sha256.Sum256(b)
}

// PeerDigest is the digest of a peer list: the XOR of [PeerEntryHash]
// over its entries (zero for an empty list), so that it does not depend
// on their order and an entry can be added or taken out in O(1). It
// detects drift between honest peers; it is no defence against a peer
// that lies, which needs none.
func PeerDigest(entries []PeerInfo) [PeerDigestSize]byte {
	var d [PeerDigestSize]byte
	for _, p := range entries {
		XorDigest(&d, PeerEntryHash(p))
	}
	return d
}

// XorDigest adds (or takes out) the entry hash h to or from d.
func XorDigest(d *[PeerDigestSize]byte, h [PeerDigestSize]byte) {
	for i := range d {
		d[i] ^= h[i]
	}
}

// ParsePeerUpdate decodes a peer-update payload strictly. Entries keep
// only the addresses that pass [CheckListenAddr], as in [ParsePeerList].
func ParsePeerUpdate(b []byte) (*PeerUpdate, error) {
	var u PeerUpdate
	if err := Unmarshal(b, &u); err != nil {
		return nil, fmt.Errorf("peer update: %w", err)
	}
	if len(u.Digest) != PeerDigestSize {
		return nil, fmt.Errorf("peer update: %w: %d-byte digest, want %d", ErrMalformed, len(u.Digest), PeerDigestSize)
	}
	for i, p := range u.Set {
		if len(p.Addrs) > MaxListenAddrs {
			return nil, fmt.Errorf("peer update: %w: %d addresses for one peer", ErrMalformed, len(p.Addrs))
		}
		var n int
		u.Set[i].Addrs, n = filterListenAddrs(p.Addrs)
		u.IgnoredAddrs += n
	}
	return &u, nil
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

// LinkMove steps (PROTOCOL.md §14.12).
const (
	// MoveAsk says the sender will dial the receiver's Unix socket if
	// the receiver agrees.
	MoveAsk uint8 = 1
	// MoveAgree answers a MoveAsk: a Unix link the asker dials now
	// replaces the TCP link the frame came on.
	MoveAgree uint8 = 2
)

// LinkMove is the payload of FrameLinkMove. Wire: {0: uint step}.
type LinkMove struct {
	Step uint8 `cbor:"0,keyasint"`
}

// ParseLinkMove decodes a link-move payload strictly. A step other than
// [MoveAsk] and [MoveAgree] is malformed.
func ParseLinkMove(b []byte) (*LinkMove, error) {
	var m LinkMove
	if err := Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("link move: %w", err)
	}
	if m.Step != MoveAsk && m.Step != MoveAgree {
		return nil, fmt.Errorf("link move: %w: step %d", ErrMalformed, m.Step)
	}
	return &m, nil
}
