package peers

import (
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Host is what connection management asks of the node: the roster, the
// admission of a link, and what happens on a link's life (up, each
// frame, down). The service decides and keeps the table; the node acts
// on the mesh's content, counts and logs. It is the seam a future
// overlay topology plugs into, as syncthing's connections.Service hands
// its connections to the model.
type Host interface {
	// Self is the node's identity key (it changes at a rekey).
	Self() proto.PubKey
	// Member reports whether k is in the current roster. It is called
	// with the table's mutex held: roster updates swap the roster under
	// it, so the answer agrees with the table.
	Member(k proto.PubKey) bool
	// Admit runs before a link is registered; false turns it away (the
	// host has said goodbye and closed it).
	Admit(l *transport.Link) bool
	// LinkUp runs once a link is registered and started: the host
	// counts it, logs it and sends its opening frames.
	LinkUp(u Up)
	// Frame handles one frame read on pl (the frame dispatch).
	Frame(pl *Link, frame []byte)
	// LinkDown runs once a registered link has ended and the table has
	// been told.
	LinkDown(d Down)
	// Rejected runs when a link is closed at admission, for r.
	Rejected(l *transport.Link, r Rejection)
	// Rehomed runs when frames queued on loser, the losing link of a
	// duplicate pair, were sent on the winner (moved) or refused by it
	// (dropped, by type).
	Rehomed(loser *Link, moved int, dropped []proto.FrameType)
}

// Dialer is what the dial scheduler (Table.DueLocked) asks of the node,
// with the table's mutex held.
type Dialer interface {
	// AskMoveLocked runs for each linked member: it may ask the member
	// to move the link to its Unix socket, and returns when it next
	// should look (zero: no need).
	AskMoveLocked(p *Peer, now time.Time) time.Time
	// StartDialLocked marks p as being dialled and starts a dial of
	// addrs.
	StartDialLocked(p *Peer, addrs []transport.Addr)
}

// Up is a link just registered.
type Up struct {
	Link *Link
	// Replaced: the link won a duplicate pair over the member's link.
	Replaced bool
	// IgnoredAddrs counts the listen addresses of the handshake that
	// could not be dialled.
	IgnoredAddrs int
}

// Down is a registered link that ended.
type Down struct {
	Link *Link
	// Refused: the link counted as refused by the peer (see LinkDown).
	Refused bool
	// Closing: the node is closing; the link went down with it.
	Closing bool
}

// Rejection is why a link was closed at admission.
type Rejection int

const (
	// NotMember: the peer left the roster between the handshake and
	// the link's registration.
	NotMember Rejection = iota
	// Duplicate: the link lost its duplicate pair to the member's link.
	Duplicate
)
