package peers

import (
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/mdns"
)

// Host is what connection management asks of the node: the roster, the
// admission of a link, what happens on a link's life (up, each frame,
// down), and what it counts. The service decides, keeps the table and
// runs the loops; the node acts on the mesh's content, counts and logs.
// It is the seam a future overlay topology plugs into, as syncthing's
// connections.Service hands its connections to the model.
type Host interface {
	// Self is the node's identity key (it changes at a rekey).
	Self() proto.PubKey
	// Member reports whether k is in the current roster. It is called
	// with the table's mutex held: roster updates swap the roster under
	// it, so the answer agrees with the table.
	Member(k proto.PubKey) bool
	// Roster is the current roster.
	Roster() *roster.Roster
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
	// SendFailed runs when a frame of type t could not be queued on pl
	// nor on the peer's link of the moment.
	SendFailed(pl *Link, t proto.FrameType, err error)
	// Count adds n to the node's counter of c.
	Count(c Counter, n uint64)
	// Resend re-sends what pl's peer has not acknowledged; the exchange
	// loop calls it for every link each PeerExchangeInterval.
	Resend(pl *Link)
	// OtherOrg runs when a node of another org was found: a seed whose
	// dial failed (Seed, why each address failed), or an mDNS
	// announcement (MDNS). The host may knock (PROTOCOL.md §14.11).
	OtherOrg(o OtherOrg)
	// Knocked answers a knock the transport refused at the end of its
	// handshake (Refuse), before the link closes.
	Knocked(l *transport.Link)
}

// OtherOrg is a node of another org that connection management met.
type OtherOrg struct {
	Seed []DialFailure // a seed dial that failed, why each address did
	MDNS *mdns.Peer    // an announcement of another org
}

// Counter is an event connection management counts; the node defines
// the metric of each (node/peerhost.go).
type Counter uint8

// The counters.
const (
	DialAttempt               Counter = iota // outbound dial attempts
	DialFailed                               // dials that failed
	DialSeedFailed                           // dials of static seeds that failed
	AddrEvicted                              // gossiped addresses dropped after failed dials
	AddrIgnored                              // listen addresses that could not be dialled
	MDNSSeen                                 // mDNS announcements of members
	MDNSIgnoredVersion                       // mDNS announcements of another protocol version
	MDNSIgnoredNotMember                     // mDNS announcements of non-members
	PeersMalformed                           // peers or peer-update frames that did not parse
	PeersIgnoredNotMember                    // peer-list entries of non-members
	PeersUpdates                             // peer-update frames received
	PeersResyncAsked                         // peer-updates asking for the whole list
	PeersDigestMismatch                      // peer-updates whose digest the copy did not match
	LinkMoveAsked                            // asks to move a link to the peer's Unix socket
	LinkMoveMalformed                        // link-move frames that did not parse
	LinkMoveIgnored                          // link-move frames not acted on
	LinkMoveAgreed                           // asks agreed to
	LinkMoved                                // links moved to a Unix socket
	LinkMoveFailed                           // Unix dials of a move that did not take the link
	LinkMoveLate                             // goodbyes whose Unix link did not come in MoveGrace
	SeedsSkippedUnixNotLocal                 // seeds-file Unix sockets not on this host
	SeedsSkippedRemovedMember                // seeds dropped for reaching removed members
	RosterPushedRefused                      // rosters sent to a refused former member
	FrameUnknown                             // frames of an addition the service behaves as without (Legacy)
	NumCounters
)

// Dialer is what the dial scheduler (Table.DueLocked) asks of its
// caller, with the table's mutex held. The Service is the one the node
// runs.
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
