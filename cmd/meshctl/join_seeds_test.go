package main

import (
	"slices"
	"testing"

	"github.com/meshd/meshd/proto"
)

// TestJoinSeedsAndOrder: join tries the token's TCP addresses before its
// Unix sockets, and keeps the sockets as seeds only when it joined over
// one (PROTOCOL.md §14.9).
func TestJoinSeedsAndOrder(t *testing.T) {
	t.Parallel()
	tok := &proto.InviteToken{
		Addrs: []string{"unix:///home/a/.meshd/link.sock", "tcp://192.0.2.10:7946", "tcp://[2001:db8::1]:7946"},
		Seeds: []string{"tcp://192.0.2.11:7946", "unix:///home/b/.meshd/link.sock", "tcp://192.0.2.10:7946"},
	}
	if got, want := joinOrder(tok.Addrs), []string{"tcp://192.0.2.10:7946", "tcp://[2001:db8::1]:7946", "unix:///home/a/.meshd/link.sock"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if got, want := joinSeeds(tok, "tcp://192.0.2.10:7946"), []string{"tcp://192.0.2.10:7946", "tcp://[2001:db8::1]:7946", "tcp://192.0.2.11:7946"}; !slices.Equal(got, want) {
		t.Errorf("seeds after a TCP join %v, want %v", got, want)
	}
	if got := joinSeeds(tok, "unix:///home/a/.meshd/link.sock"); len(got) != 5 || !slices.Contains(got, "unix:///home/b/.meshd/link.sock") {
		t.Errorf("seeds after a join over the socket: %v", got)
	}
}
