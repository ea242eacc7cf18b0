package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshd/meshd/node/home"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// The counters counted in this file.
var (
	famSeedsSkipped = newFamily("meshd_seeds_skipped_total", "Static seeds not dialled: a seeds-file Unix socket not on this host, or a seed that reached a removed member.", "reason")

	cSeedsSkippedUnixNotLocal  = newCounter("seeds.skipped.unix_not_local", famSeedsSkipped, "unix_not_local")
	cSeedsSkippedRemovedMember = newCounter("seeds.skipped.removed_member", famSeedsSkipped, "removed_member")
)

// Static seeds: the --seed addresses and those of the seeds file that
// 'meshctl join' wrote (PROTOCOL.md §14.9). A seed is dialled by address,
// whatever key answers; once it linked, it is known by that key.
//
//   - A Unix socket address in the seeds file is taken only if the socket
//     is on this host: a file written by an older meshctl join holds the
//     inviting node's socket, which a joiner on another host can never
//     reach, and would warn "unreachable seeds" for as long as it runs.
//   - A seed that reached a member a roster update removed is dialled no
//     more, and its line leaves the seeds file: it would only be refused.
//     So is a seed that never linked and answers with the key of a
//     member removed by an update this node applied.

// joinedSeeds reads the seeds file 'meshctl join' wrote, skipping (and
// logging) lines that do not parse, addresses already given, and Unix
// sockets that are not on this host.
func (n *Node) joinedSeeds() []transport.Addr {
	data, err := os.ReadFile(filepath.Join(n.cfg.Home, seedsFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			n.log.Warn("read seeds file", "err", err)
		}
		return nil
	}
	var out []transport.Addr
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		a, err := transport.ParseAddr(line)
		if err != nil {
			n.log.Warn("seeds file: skipping a line", "line", line, "err", err)
			continue
		}
		if a.Network == "unix" && !n.localSocket(a.Address) {
			n.metrics.inc(cSeedsSkippedUnixNotLocal)
			n.log.Info("seeds file: skipping a Unix socket that is not on this host", "seed", a.String())
			continue
		}
		if !slices.Contains(n.cfg.Seeds, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// localSocket reports whether path is a Unix socket on this host other
// than this node's own.
func (n *Node) localSocket(path string) bool {
	if path == n.home.LinkSocket() {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// dropRemovedSeedsLocked stops dialling the seeds that reached a member
// that is not in the roster any more, and returns their addresses. The
// caller holds the peers mutex.
func (n *Node) dropRemovedSeedsLocked(isMember func(proto.PubKey) bool) []string {
	var gone []string
	n.peers.Seeds = slices.DeleteFunc(n.peers.Seeds, func(s *peers.Peer) bool {
		if s.Key.IsZero() || isMember(s.Key) {
			return false
		}
		gone = append(gone, s.Addrs.List()[0].String())
		return true
	})
	return gone
}

// forgetSeeds removes the lines holding addrs from the seeds file, if it
// has any.
func (n *Node) forgetSeeds(addrs []string) {
	path := filepath.Join(n.cfg.Home, seedsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	kept := slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		return slices.Contains(addrs, strings.TrimSpace(l))
	})
	if len(kept) == len(lines) {
		return
	}
	if err := home.WriteFileAtomic(path, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		n.log.Warn("seeds file: dropping the seeds of removed members", "err", err)
	}
}

// formerMemberError is admit's refusal of a peer that a roster update
// this node applied removed. A seed dial that meets it is dropped.
type formerMemberError struct {
	key proto.PubKey
	err error
}

func (e *formerMemberError) Error() string { return e.err.Error() }
func (e *formerMemberError) Unwrap() error { return e.err }

// dropSeedLocked stops dialling seed s, if it is still in the list, and
// returns its address ("" if it was not). The caller holds the peers
// mutex.
func (n *Node) dropSeedLocked(s *peers.Peer) string {
	i := slices.Index(n.peers.Seeds, s)
	if i < 0 {
		return ""
	}
	n.peers.Seeds = slices.Delete(n.peers.Seeds, i, i+1)
	return s.Addrs.List()[0].String()
}

// seedsGone counts, logs and forgets seeds dropped for reaching removed
// members.
func (n *Node) seedsGone(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	n.metrics.add(cSeedsSkippedRemovedMember, uint64(len(addrs)))
	n.log.Info("seeds of removed members are dialled no more", "seeds", addrs)
	n.forgetSeeds(addrs)
}
