package peers

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// TestSeedsFileHostAndRemovals: the seeds file's Unix sockets are taken
// only when they are sockets on this host (not this node's own), and the
// lines of seeds that reached removed members leave the file.
func TestSeedsFileHostAndRemovals(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "other.sock") // a neighbour on this host
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no Unix sockets here: %v", err)
	}
	defer ln.Close()
	own := filepath.Join(dir, "link.sock") // this node's own socket, never a seed
	lnOwn, err := net.Listen("unix", own)
	if err != nil {
		t.Fatal(err)
	}
	defer lnOwn.Close()
	path := filepath.Join(dir, "seeds")
	h := newFakeHost(seedKey(t, 9))
	s := NewService(h, ServiceConfig{SeedsFile: path, OwnSocket: own})
	lines := "# written by 'meshctl join'\n" +
		"tcp://192.0.2.10:7946\n" +
		"unix:///nonexistent/other-host/.meshd/link.sock\n" +
		"unix://" + sock + "\n" +
		"unix://" + own + "\n" +
		"tcp://192.0.2.11:7946\n"
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range s.JoinedSeeds(nil) {
		got = append(got, a.String())
	}
	want := []string{"tcp://192.0.2.10:7946", "unix://" + sock, "tcp://192.0.2.11:7946"}
	if !slices.Equal(got, want) {
		t.Fatalf("seeds %v, want %v", got, want)
	}
	if c := h.counts[SeedsSkippedUnixNotLocal].Load(); c != 2 {
		t.Fatalf("seeds.skipped.unix_not_local %d, want 2", c)
	}

	// The seed at 192.0.2.11 reached a member that is then removed.
	removed := seedKey(t, 7)
	s.Seeds = []*Peer{
		{Seed: true, Addrs: SeedBook(mustAddr(t, "tcp://192.0.2.10:7946")), Key: seedKey(t, 1)},
		{Seed: true, Addrs: SeedBook(mustAddr(t, "tcp://192.0.2.11:7946")), Key: removed},
		{Seed: true, Addrs: SeedBook(mustAddr(t, "tcp://192.0.2.12:7946"))}, // never linked
	}
	gone := s.DropRemovedSeedsLocked(func(k proto.PubKey) bool { return !k.Equal(removed) })
	if !slices.Equal(gone, []string{"tcp://192.0.2.11:7946"}) || len(s.Seeds) != 2 {
		t.Fatalf("dropped %v, %d seeds left", gone, len(s.Seeds))
	}
	s.SeedsGone(gone)
	if c := h.counts[SeedsSkippedRemovedMember].Load(); c != 1 {
		t.Fatalf("seeds.skipped.removed_member %d, want 1", c)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.DeleteFunc(slices.Clone(splitLines(lines)), func(l string) bool { return l == "tcp://192.0.2.11:7946" }); !slices.Equal(splitLines(string(b)), want) {
		t.Fatalf("seeds file after the removal:\n%s", b)
	}
}

func seedKey(t *testing.T, b byte) proto.PubKey {
	t.Helper()
	var k proto.PubKey
	for i := range k {
		k[i] = b
	}
	return k
}

func mustAddr(t *testing.T, s string) transport.Addr {
	t.Helper()
	a, err := transport.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func splitLines(s string) []string { return strings.Split(s, "\n") }
