package proto_test

import (
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// FuzzCheckListenAddr: the grammar never panics, and every address it
// accepts is within its limits and parses as a transport address, which
// is what a node dials (so a kept address is never skipped again later).
func FuzzCheckListenAddr(f *testing.F) {
	for _, s := range []string{
		"tcp://192.0.2.10:7946", "tcp://[2001:db8::1]:7946", "tcp://node-1.example.com:1",
		"unix:///run/meshd/meshd.sock", "tcp://:7946", "tcp://[::ffff:1.2.3.4]:65535",
		"quic://10.0.0.1:7946", "tcp://1.2.3.4:07946", "unix:///a/../b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if proto.CheckListenAddr(s) != nil {
			return
		}
		if len(s) > proto.MaxListenAddrLen || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("%q accepted beyond the limits", s)
		}
		a, err := transport.ParseAddr(s)
		if err != nil {
			t.Fatalf("%q accepted, but the transport cannot parse it: %v", s, err)
		}
		if a.String() != s {
			t.Fatalf("%q parses as %q", s, a.String())
		}
		if a.Network == "tcp" {
			host, port, err := net.SplitHostPort(a.Address)
			if err != nil || host == "" || port == "0" {
				t.Fatalf("%q accepted: host %q port %q (%v)", s, host, port, err)
			}
		}
	})
}
