package proto

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCheckListenAddr(t *testing.T) {
	long := "tcp://" + strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 60) + ":1"
	for _, s := range []string{
		"tcp://192.0.2.10:7946",
		"tcp://10.0.0.1:1",
		"tcp://10.0.0.1:65535",
		"tcp://[2001:db8::1]:7946",
		"tcp://[::1]:7946",
		"tcp://[::ffff:192.0.2.1]:7946",
		"tcp://localhost:7946",
		"tcp://node-1.example.com:7946",
		"tcp://A.EXAMPLE:7946",
		"tcp://host.3com:7946",
		"unix:///run/meshd/meshd.sock",
		"unix:///x",
		long,
	} {
		if err := CheckListenAddr(s); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range []string{
		"",
		"http://10.0.0.1:80",
		"quic://10.0.0.1:7946",
		"10.0.0.1:7946",
		"TCP://10.0.0.1:7946",
		"tcp://10.0.0.1",
		"tcp://10.0.0.1:",
		"tcp://10.0.0.1:0",
		"tcp://10.0.0.1:65536",
		"tcp://10.0.0.1:07946",
		"tcp://10.0.0.1:+7946",
		"tcp://10.0.0.1:7946/",
		"tcp://:7946",
		"tcp://0.0.0.0:7946",
		"tcp://[::]:7946",
		"tcp://010.0.0.1:7946",
		"tcp://1.2.3:7946",
		"tcp://2001:db8::1:7946",
		"tcp://[2001:db8::1%eth0]:7946",
		"tcp://[10.0.0.1]:7946",
		"tcp://[2001:db8::1:7946",
		"tcp://-host:7946",
		"tcp://host-:7946",
		"tcp://ho_st:7946",
		"tcp://a..b:7946",
		"tcp://host.:7946",
		"tcp://user@host:7946",
		"tcp://" + strings.Repeat("a", 64) + ":7946",
		"tcp://ev\nil:7946",
		"unix://relative/path",
		"unix://",
		"unix:///",
		"unix:///run/../x",
		"unix:///run//x",
		"unix:///run/x/",
		"unix:///run/x\x00",
		"unix:///run/\x1bx",
		"unix:///0\x82",
		"unix:///" + strings.Repeat("p", MaxListenAddrLen),
	} {
		if err := CheckListenAddr(s); !errors.Is(err, ErrListenAddr) {
			t.Errorf("%q: %v, want ErrListenAddr", s, err)
		}
	}
}

// One unusable listen address is skipped and counted; the payload and
// the link stay good.
func TestHandshakePayloadSkipsBadListen(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	p := HandshakePayload{Version: ProtocolVersion, Org: "acme", Name: "n",
		Listen: []string{"quic://10.0.0.1:7946", "tcp://10.0.0.1:7437", "tcp://bad host:1", "unix:///tmp/x.sock"}}
	p.BindStatic(key, bytes.Repeat([]byte{9}, 32))
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseHandshakePayload(b)
	if err != nil {
		t.Fatalf("payload with unusable addresses refused: %v", err)
	}
	if want := []string{"tcp://10.0.0.1:7437", "unix:///tmp/x.sock"}; !reflect.DeepEqual(got.Listen, want) || got.IgnoredListen != 2 {
		t.Fatalf("listen %q, ignored %d; want %q, 2", got.Listen, got.IgnoredListen, want)
	}
	// Every address unusable: none left, the payload still parses.
	p.Listen = []string{"http://x"}
	b, _ = p.Encode()
	if got, err := ParseHandshakePayload(b); err != nil || got.Listen != nil || got.IgnoredListen != 1 {
		t.Fatalf("all bad: %+v, %v", got, err)
	}
	// The structural limits still make the payload malformed.
	p.Listen = []string{"tcp://" + strings.Repeat("a", MaxListenAddrLen)}
	b, _ = p.Encode()
	if _, err := ParseHandshakePayload(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("address over %d bytes: %v, want ErrMalformed", MaxListenAddrLen, err)
	}
}

func TestPeerListSkipsBadAddrs(t *testing.T) {
	b, err := Marshal(&PeerList{Peers: []PeerInfo{
		{Key: alice, Addrs: []string{"tcp://192.0.2.10:7946", "tcp://:1"}},
		{Key: bob, Addrs: []string{"unix://x"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParsePeerList(b)
	if err != nil {
		t.Fatal(err)
	}
	if l.IgnoredAddrs != 2 || !reflect.DeepEqual(l.Peers[0].Addrs, []string{"tcp://192.0.2.10:7946"}) || len(l.Peers[1].Addrs) != 0 {
		t.Fatalf("got %+v", l)
	}
}
