package peers

import (
	"sync"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// Table is who a node holds links to and whom it dials: the members it
// holds a link to or knows addresses for, at most one admitted link per
// member, and the static seeds; with them the peer list as announced,
// and the peers held back (slow, refused, pending). Its mutex (the
// node's "peers mutex") guards ByKey, Seeds, Closed, List and every
// field of each Peer; methods named …Locked expect it held. Slow,
// Pending, Former and Hashes have locks of their own.
type Table struct {
	sync.Mutex
	ByKey  map[proto.PubKey]*Peer
	Seeds  []*Peer // static seeds, dialled by address
	Closed bool    // set as the node closes: no link is added after it
	List   *PeerList

	Hashes  EntryHashes    // peer-list entry hashes, shared by the links' views
	Slow    SlowPeers      // peers closed for not reading
	Pending *Pending       // non-members refused
	Former  *FormerMembers // members removed by roster updates applied; set as the node loads them
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{ByKey: map[proto.PubKey]*Peer{}, List: NewPeerList(), Pending: NewPending()}
}

// Peer is another node we may hold a link to and may dial: a roster
// member (in ByKey), or a static seed (Seeds), which is dialled by
// address whatever key answers.
type Peer struct {
	Key  proto.PubKey // for a seed, zero until its first link, then the last key it answered with
	Seed bool         // a static seed: its one address may come to host another member (a reinstall)
	// Link is the admitted link to the member; nil while there is none.
	// Always nil for a seed: its link belongs to the member it reached.
	Link *Link
	// Addrs is where to dial and how each address was learnt; a seed
	// has its one.
	Addrs AddrBook

	// The dial backoff.
	Fails   int       // dials failed in a row
	Next    time.Time // earliest next dial
	Dialing bool      // a dial is running
	// LastDial holds why each address of the last dial failed, for
	// meshctl doctor; nil once a dial links.
	LastDial []DialFailure
	// Refusals counts links in a row the member refused (see refused.go).
	Refusals int
	// Spread is set once the first dial of the member has been put off
	// by FirstDialDelay.
	Spread bool
	// Move is the state of moving the link to the member's Unix socket.
	Move MoveState
}

// DialFailure is why a dial of one address failed.
type DialFailure struct {
	Addr transport.Addr
	Err  error
}

// MoveState is the state of moving a member's link to its Unix socket
// (move.go has the rules).
type MoveState struct {
	AskedOn *Link // the link an ask of ours waits on, or nil
	AskedAt time.Time
	Agreed  time.Time // until when a Unix link beats the member's TCP link
	Next    time.Time // earliest next ask
	Fails   int       // asks in a row that did not end on a Unix link
}

// LinkedLocked returns the link to k, or nil.
func (t *Table) LinkedLocked(k proto.PubKey) *Link {
	if p := t.ByKey[k]; p != nil {
		return p.Link
	}
	return nil
}

// MemberLocked returns the entry of member k, creating it.
func (t *Table) MemberLocked(k proto.PubKey) *Peer {
	p := t.ByKey[k]
	if p == nil {
		p = &Peer{Key: k}
		t.ByKey[k] = p
	}
	return p
}

// DialsLocked counts the dials in flight (at most MaxDials).
func (t *Table) DialsLocked() int {
	c := 0
	for _, p := range t.ByKey {
		if p.Dialing {
			c++
		}
	}
	for _, s := range t.Seeds {
		if s.Dialing {
			c++
		}
	}
	return c
}

// LinkDown is what the node knows as one of its links goes down.
type LinkDown struct {
	// Refused: the peer turned us away (a goodbye or silence right after
	// the handshake, or we are not a member): back off as from a failed
	// dial, on RefusedBackoff.
	Refused bool
	// Removed: a roster this node applied removed it; a refused member
	// is redialled only after RemovedRetryDelay.
	Removed bool
	// Member: the peer is still in the roster; its entry is dropped
	// otherwise.
	Member bool
	// Redial is when to redial a link that dropped without a refusal:
	// usually a restart or a blip.
	Redial time.Duration
}

// LinkDownLocked clears pl from its member's entry, if it is still the
// member's link, and sets when to redial it; seeds that reached the
// member wait as long. It reports whether the link counted as refused.
func (t *Table) LinkDownLocked(pl *Link, d LinkDown, now time.Time) (refused bool) {
	p := t.ByKey[pl.Key]
	if p == nil || p.Link != pl {
		return false
	}
	p.Link = nil
	if d.Refused {
		p.Refusals++
		p.Next = now.Add(RefusedBackoff(p.Refusals))
		if d.Removed {
			p.Next = now.Add(RemovedRetryDelay())
		}
	} else {
		p.Refusals = 0
		p.Next = now.Add(d.Redial)
	}
	for _, s := range t.Seeds {
		if s.Key.Equal(pl.Key) && s.Next.Before(p.Next) {
			s.Next = p.Next
		}
	}
	if !d.Member {
		delete(t.ByKey, pl.Key)
	}
	return d.Refused
}

// Links returns every link held.
func (t *Table) Links() []*Link {
	t.Lock()
	defer t.Unlock()
	return t.LinksLocked()
}

// LinksLocked returns every link held.
func (t *Table) LinksLocked() []*Link {
	out := make([]*Link, 0, len(t.ByKey))
	for _, p := range t.ByKey {
		if p.Link != nil {
			out = append(out, p.Link)
		}
	}
	return out
}

// Linked returns the link to k, or nil.
func (t *Table) Linked(k proto.PubKey) *Link {
	t.Lock()
	defer t.Unlock()
	return t.LinkedLocked(k)
}

// LinkCount returns the number of links held.
func (t *Table) LinkCount() int {
	t.Lock()
	defer t.Unlock()
	c := 0
	for _, p := range t.ByKey {
		if p.Link != nil {
			c++
		}
	}
	return c
}
