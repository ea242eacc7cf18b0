package peers

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/meshd/meshd/internal/fsutil"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
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

// AddSeeds makes given, then the seeds file's addresses (JoinedSeeds),
// the static seeds to dial. It runs before Start.
func (s *Service) AddSeeds(given []transport.Addr) {
	for _, a := range append(slices.Clone(given), s.JoinedSeeds(given)...) {
		s.Seeds = append(s.Seeds, &Peer{Seed: true, Addrs: SeedBook(a)})
	}
}

// JoinedSeeds reads the seeds file 'meshctl join' wrote, skipping (and
// logging) lines that do not parse, addresses already given, and Unix
// sockets that are not on this host.
func (s *Service) JoinedSeeds(given []transport.Addr) []transport.Addr {
	log := s.cfg.Log
	data, err := os.ReadFile(s.cfg.SeedsFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("read seeds file", "err", err)
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
			log.Warn("seeds file: skipping a line", "line", line, "err", err)
			continue
		}
		if a.Network == "unix" && !s.localSocket(a.Address) {
			s.host.Count(SeedsSkippedUnixNotLocal, 1)
			log.Info("seeds file: skipping a Unix socket that is not on this host", "seed", a.String())
			continue
		}
		if !slices.Contains(given, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// localSocket reports whether path is a Unix socket on this host other
// than this node's own.
func (s *Service) localSocket(path string) bool {
	if path == s.cfg.OwnSocket {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}

// DropRemovedSeedsLocked stops dialling the seeds that reached a member
// that is not in the roster any more, and returns their addresses.
func (s *Service) DropRemovedSeedsLocked(isMember func(proto.PubKey) bool) []string {
	var gone []string
	s.Seeds = slices.DeleteFunc(s.Seeds, func(sd *Peer) bool {
		if sd.Key.IsZero() || isMember(sd.Key) {
			return false
		}
		gone = append(gone, sd.Addrs.List()[0].String())
		return true
	})
	return gone
}

// forgetSeeds removes the lines holding addrs from the seeds file, if it
// has any.
func (s *Service) forgetSeeds(addrs []string) {
	path := s.cfg.SeedsFile
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
	if err := fsutil.WriteAtomic(path, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		s.cfg.Log.Warn("seeds file: dropping the seeds of removed members", "err", err)
	}
}

// dropSeedLocked stops dialling seed sd, if it is still in the list, and
// returns its address ("" if it was not).
func (s *Service) dropSeedLocked(sd *Peer) string {
	i := slices.Index(s.Seeds, sd)
	if i < 0 {
		return ""
	}
	s.Seeds = slices.Delete(s.Seeds, i, i+1)
	return sd.Addrs.List()[0].String()
}

// SeedsGone counts, logs and forgets seeds dropped for reaching removed
// members.
func (s *Service) SeedsGone(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	s.host.Count(SeedsSkippedRemovedMember, uint64(len(addrs)))
	s.cfg.Log.Info("seeds of removed members are dialled no more", "seeds", addrs)
	s.forgetSeeds(addrs)
}
