package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famRosterRefused = newFamily("meshd_roster_pushes_refused_total", "Rosters sent to a refused former member before the goodbye, so it learns of its removal.")

	cRosterPushedRefused = newCounter("roster.pushed_refused", famRosterRefused)
)

// A node that is not a member, or holds an old roster that still lists
// it, dials members that refuse it. Without help it would count each
// refusal as a successful dial and redial at once, forever. So:
//
//   - The refusing responder tells the peer why on the completed session
//     ([Node.refuse]): a former member gets the current signed roster,
//     which it verifies and applies like any roster update, and so learns
//     it was removed; everyone gets a goodbye.
//   - An outbound link that the peer ends with a goodbye, or without any
//     frame at all, within refusedWithin of the handshake counts as a
//     refused dial, and the dialler backs off on refusedBackoff: at most
//     ten dials in the first ten seconds, then one per 30 s.
//   - A node that applied a roster removing itself knows, verifiably, that
//     every member refuses it: it dials each member and seed only once
//     per removedRetry, in case an admin adds it back (status and doctor
//     say so).

// silentlyRefused reports whether pl is an outbound link the peer closed
// soon after the handshake without sending a single frame: a responder
// that refuses without saying so (meshd before refusals were explained
// closed at once), since an admitted link always brings at least a
// policy digest frame (PROTOCOL.md §14.3).
func silentlyRefused(pl *peerLink) bool {
	return pl.link.Outbound() && pl.link.Stats().FramesIn == 0 &&
		time.Since(pl.link.Established()) < refusedWithin
}

// refusedWithin is how soon after the handshake a goodbye marks an
// outbound link as refused. A refusal arrives in the first round trip;
// legitimate goodbyes (shutdown, duplicate link) come later or on links
// that are not registered.
const refusedWithin = 3 * time.Second

// refusedBackoffMax is the slowest redial of a peer that refuses us.
const refusedBackoffMax = 30 * time.Second

// maxFormerMembers bounds the keys remembered as removed members.
const maxFormerMembers = 4096

// formerMembersFile lists, one key per line, members removed by roster
// updates this node applied: the peers that get the roster when refused.
const formerMembersFile = "former-members"

// refusedBackoff returns the redial delay after refusals refused dials
// in a row: 1 s, 2 s, 4 s, 8 s, 16 s, then 30 s, each lengthened by up to
// a quarter (never shortened, so the bounds above hold).
func refusedBackoff(refusals int) time.Duration {
	d := time.Second
	for i := 1; i < refusals && d < refusedBackoffMax; i++ {
		d *= 2
	}
	d = min(d, refusedBackoffMax)
	return d + time.Duration(rand.Int64N(int64(d/4)))
}

// removedRetry is how often a node removed from the roster redials each
// member and seed.
const removedRetry = 10 * time.Minute

// removedRetryDelay is removedRetry lengthened by up to a quarter, so that
// the dials of a removed node's peers do not stay in step.
func removedRetryDelay() time.Duration {
	return removedRetry + time.Duration(rand.Int64N(int64(removedRetry/4)))
}

// removedSelf reports whether this node applied a roster update that
// removed it, and is not in its current roster.
func (n *Node) removedSelf() bool {
	return !n.isMember() && n.wasMember(n.id.Pub)
}

// isMember reports whether this node is in its current roster.
func (n *Node) isMember() bool {
	_, ok := n.Roster().Member(n.id.Pub)
	return ok
}

// refuse is the transport's Refused hook: Admit turned a peer away at the
// end of a completed handshake. A former member with an older roster gets
// ours, which tells it (verifiably) that it was removed; every refused
// peer gets a goodbye. Only former members get the roster: it names every
// member, and anyone who knows the org id can complete a handshake.
func (n *Node) refuse(l *transport.Link, err error) {
	p := l.Peer()
	r := n.Roster()
	if p.Knock && !p.Identity.Equal(n.id.Pub) {
		n.answerKnockRefused(l)
		return
	}
	if p.Identity.Equal(n.id.Pub) {
		_ = l.Send(goodbyeFrame("this is the node itself"))
		return
	}
	if p.RosterVersion < r.Version && n.wasMember(p.Identity) {
		if b, eerr := r.Encode(); eerr == nil {
			n.metrics.inc(cRosterPushedRefused)
			_ = l.Send(append([]byte{byte(proto.FrameRoster)}, b...))
		}
	}
	_ = l.Send(goodbyeFrame(fmt.Sprintf("not a member of roster %q v%d", r.Org, r.Version)))
	n.logRL.log(n.log, "handshake refused", p.Identity.Fingerprint(), "not_member",
		"peer", p.Identity.Fingerprint(), "remote", l.RemoteAddr(), "peer_roster", p.RosterVersion,
		"roster", r.Version, "err", err)
}

// wasMember reports whether k was removed from the roster by an update
// this node applied.
func (n *Node) wasMember(k proto.PubKey) bool {
	n.former.Lock()
	defer n.former.Unlock()
	return n.former.keys[k]
}

// loadFormerMembers reads the former members file; a missing or damaged
// one leaves the set empty (it only decides whom we tell).
func (n *Node) loadFormerMembers() {
	n.former.keys = map[proto.PubKey]bool{}
	b, err := os.ReadFile(n.home.Dir + string(os.PathSeparator) + formerMembersFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			n.log.Warn("read former members", "err", err)
		}
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() && len(n.former.keys) < maxFormerMembers {
		if k, err := proto.ParsePubKey(string(bytes.TrimSpace(sc.Bytes()))); err == nil {
			n.former.keys[k] = true
		}
	}
}

// noteRemoved remembers the members of cur that next drops.
func (n *Node) noteRemoved(cur, next *roster.Roster) {
	n.former.Lock()
	defer n.former.Unlock()
	changed := false
	for _, m := range cur.Members {
		if _, ok := next.Member(m.Key); !ok && !n.former.keys[m.Key] && len(n.former.keys) < maxFormerMembers {
			n.former.keys[m.Key] = true
			changed = true
		}
	}
	for _, m := range next.Members {
		if n.former.keys[m.Key] {
			delete(n.former.keys, m.Key) // added back
			changed = true
		}
	}
	if !changed {
		return
	}
	lines := make([]string, 0, len(n.former.keys))
	for k := range n.former.keys {
		lines = append(lines, k.String())
	}
	slices.Sort(lines)
	var buf bytes.Buffer
	for _, s := range lines {
		buf.WriteString(s)
		buf.WriteByte('\n')
	}
	if err := fsutil.WriteAtomic(n.home.Dir+string(os.PathSeparator)+formerMembersFile, buf.Bytes(), 0o600); err != nil {
		n.log.Warn("write former members", "err", err)
	}
}
