package peers

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Link is an admitted link and what we learnt of the peer at the
// handshake. The history syncer, the receive pipeline and the frame
// handlers take a *Link; the node's peer table holds at most one per
// member.
type Link struct {
	Conn    *transport.Link
	Key     proto.PubKey
	Payload *proto.HandshakePayload
	// listen is what the peer last said its addresses are: from message 3
	// when it dialled us, else from its own peer list entry.
	listen atomic.Pointer[[]string]
	// Refused is set when the peer ended our outbound link with a goodbye
	// right after the handshake (see refused.go).
	Refused atomic.Bool
	// byeSent is set once this node sent the link a goodbye: a link gets
	// at most one, so a goodbye received is answered only by a node that
	// has not said its own (PROTOCOL.md §14.8).
	byeSent atomic.Bool
	// retired is set once the link lost a duplicate pair (retire.go).
	retired atomic.Bool
	PX      Exchange // incremental peer exchange on this link
}

// NewLink wraps an admitted transport link.
func NewLink(l *transport.Link) *Link {
	return &Link{Conn: l, Key: l.PeerKey(), Payload: l.Peer()}
}

// GoodbyeFrame is a goodbye frame (PROTOCOL.md §14.8) saying reason.
func GoodbyeFrame(reason string) []byte {
	return append([]byte{byte(proto.FrameGoodbye)}, reason...)
}

// SayGoodbye sends the link a goodbye with reason, unless it was sent one
// already. It reports whether it sent it.
func (pl *Link) SayGoodbye(reason string) bool {
	if pl.byeSent.Swap(true) {
		return false
	}
	_ = pl.Conn.Send(GoodbyeFrame(reason))
	return true
}

// Retired reports whether the link lost a duplicate pair: it is closing,
// and the winner's link-up sends the frames of a session afresh.
func (pl *Link) Retired() bool { return pl.retired.Load() }

// SaidGoodbye reports whether this node sent the link its goodbye.
func (pl *Link) SaidGoodbye() bool { return pl.byeSent.Load() }

// ListenAddrs returns the peer's addresses as it last told them.
func (pl *Link) ListenAddrs() []string {
	if p := pl.listen.Load(); p != nil {
		return *p
	}
	return pl.Payload.Listen
}

// SetListen records the addresses the peer told in its own peer-list
// entry.
func (pl *Link) SetListen(addrs []string) {
	c := slices.Clone(addrs)
	pl.listen.Store(&c)
}

// Exchange is one link's incremental peer-exchange state (PROTOCOL.md
// §14.4): what this node told the peer, and the peer's list as received.
type Exchange struct {
	// Guarded by the node's peers mutex: sending side.
	SentVer uint64 // the version this link has been told up to
	Told    bool   // it has been sent a list
	// Set by the link's reader; read by the exchange loop.
	Speaks atomic.Bool
	// The peer's list as received: written by the link's reader, read by
	// the node's link reports for the status page's link graph.
	ViewMu     sync.Mutex
	View       map[proto.PubKey][proto.PeerDigestSize]byte // guarded by ViewMu
	ViewDigest [proto.PeerDigestSize]byte                  // guarded by ViewMu
	ViewAt     time.Time                                   // last list or update received; guarded by ViewMu
	AskedAt    time.Time                                   // when this node last asked for the whole list (the reader only)
	AnsweredAt time.Time                                   // when it last answered the peer's request (peers mutex)
}

// ViewSet and ViewDel change the view; the caller holds ViewMu. The
// entry is hashed with hash, only once it is known to be kept; a new
// entry past limit is left out (a drift the digest will show, bounded).
func (x *Exchange) ViewSet(p proto.PeerInfo, hash func(proto.PeerInfo, int) [proto.PeerDigestSize]byte, limit int) {
	if x.View == nil {
		x.View = map[proto.PubKey][proto.PeerDigestSize]byte{}
	}
	old, ok := x.View[p.Key]
	if !ok && len(x.View) >= limit {
		return
	}
	if ok {
		proto.XorDigest(&x.ViewDigest, old)
	}
	h := hash(p, limit)
	x.View[p.Key] = h
	proto.XorDigest(&x.ViewDigest, h)
}

// ViewDel removes k from the view; the caller holds ViewMu.
func (x *Exchange) ViewDel(k proto.PubKey) {
	if old, ok := x.View[k]; ok {
		proto.XorDigest(&x.ViewDigest, old)
		delete(x.View, k)
	}
}

// ViewKeys lists the keys of the link's copy, but the peer's own, up to
// max, if the copy was confirmed since notBefore.
func (x *Exchange) ViewKeys(peer proto.PubKey, notBefore time.Time, max int) (keys []proto.PubKey, ok bool) {
	x.ViewMu.Lock()
	defer x.ViewMu.Unlock()
	if x.ViewAt.IsZero() || x.ViewAt.Before(notBefore) {
		return nil, false
	}
	keys = make([]proto.PubKey, 0, min(len(x.View), max))
	for k := range x.View {
		if len(keys) == max {
			break
		}
		if !k.Equal(peer) {
			keys = append(keys, k)
		}
	}
	return keys, true
}
