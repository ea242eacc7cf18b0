package transport

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

func TestParseAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Addr
		ok   bool
	}{
		{"tcp://127.0.0.1:7000", Addr{"tcp", "127.0.0.1:7000"}, true},
		{"tcp://[::1]:7000", Addr{"tcp", "[::1]:7000"}, true},
		{"tcp://node.lan:0", Addr{"tcp", "node.lan:0"}, true},
		{"tcp://:7000", Addr{"tcp", ":7000"}, true},
		{"unix:///run/meshd/link.sock", Addr{"unix", "/run/meshd/link.sock"}, true},
		{"tcp://127.0.0.1", Addr{}, false},
		{"tcp://127.0.0.1:70000", Addr{}, false},
		{"tcp://127.0.0.1:-1", Addr{}, false},
		{"tcp://127.0.0.1:http", Addr{}, false},
		{"tcp://127.0.0.1:07000", Addr{}, false},
		{"tcp://::1:7000", Addr{}, false},
		{"tcp://host:1/path", Addr{}, false},
		{"tcp://user@host:1", Addr{}, false},
		{"unix://relative/path", Addr{}, false},
		{"unix://", Addr{}, false},
		{"unix:///", Addr{}, false},
		{"unix:///a/../b", Addr{}, false},
		{"unix:///a/", Addr{}, false},
		{"udp://1.2.3.4:5", Addr{}, false},
		{"127.0.0.1:7000", Addr{}, false},
		{"TCP://127.0.0.1:7000", Addr{}, false},
		{"", Addr{}, false},
	} {
		got, err := ParseAddr(tc.in)
		if tc.ok != (err == nil) {
			t.Errorf("ParseAddr(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !errors.Is(err, ErrBadAddr) {
				t.Errorf("ParseAddr(%q) error %v does not wrap ErrBadAddr", tc.in, err)
			}
			continue
		}
		if got != tc.want || got.String() != tc.in {
			t.Errorf("ParseAddr(%q) = %+v (%s)", tc.in, got, got)
		}
		var back Addr
		if txt, err := got.MarshalText(); err != nil || back.UnmarshalText(txt) != nil || back != got {
			t.Errorf("text round trip of %q failed", tc.in)
		}
	}
}

func TestConfigRequired(t *testing.T) {
	t.Parallel()
	good := testConfig(t, testOrg)
	for name, cfg := range map[string]Config{
		"no identity": {Org: testOrg},
		"no org":      {Identity: good.Identity},
		"long org":    {Identity: good.Identity, Org: strings.Repeat("x", proto.MaxOrgLen+1)},
	} {
		if _, err := Listen(context.Background(), listenAddr(t, "tcp"), cfg); err == nil {
			t.Errorf("%s: Listen succeeded", name)
		}
		if _, err := Dial(context.Background(), Addr{"tcp", "127.0.0.1:1"}, cfg, nil); err == nil {
			t.Errorf("%s: Dial succeeded", name)
		}
	}
	bad := good
	bad.Payload = func() proto.HandshakePayload {
		return proto.HandshakePayload{Listen: make([]string, proto.MaxListenAddrs+1)}
	}
	ln := listen(t, "tcp", testConfig(t, testOrg))
	if _, err := Dial(context.Background(), ln.Addr(), bad, nil); err == nil || !strings.Contains(err.Error(), "local payload") {
		t.Errorf("Dial with an invalid local payload = %v", err)
	}
}

func TestListenUnixSocketFile(t *testing.T) {
	checkLeaks(t)
	dir := testDir(t)
	path := filepath.Join(dir, "m.sock")
	addr := Addr{"unix", path}

	// A stale socket left by a crashed process is replaced.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	cfg := testConfig(t, testOrg)
	ln, err := Listen(context.Background(), addr, cfg)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("socket mode %v, want 0600 socket", fi.Mode())
	}
	if ln.Addr() != addr {
		t.Errorf("Addr = %v", ln.Addr())
	}

	// A live socket is not stolen.
	if _, err := Listen(context.Background(), addr, cfg); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Listen = %v, want in use", err)
	}
	out, in := pair(t, ln, testConfig(t, testOrg), nil)
	out.Close()
	in.Close()

	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after Close: %v", err)
	}

	// Anything that is not a socket is left alone.
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(context.Background(), addr, cfg); err == nil {
		t.Error("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("regular file changed")
	}
}

func TestListenerAddrTCP(t *testing.T) {
	checkLeaks(t)
	ln := listen(t, "tcp", testConfig(t, testOrg))
	a := ln.Addr()
	if a.Network != "tcp" || strings.HasSuffix(a.Address, ":0") {
		t.Errorf("Addr = %v, want the bound port", a)
	}
	if _, err := ParseAddr(a.String()); err != nil {
		t.Error(err)
	}
}

func TestListenerClose(t *testing.T) {
	checkLeaks(t)
	ln, rec := listenRec(t, "tcp", testConfig(t, testOrg))
	// A handshake in progress, stalled by a peer that says nothing.
	conn, err := net.Dial("tcp", ln.Addr().Address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitStat(t, ln, "the stalled handshake pending", func(s ListenerStats) bool { return s.Pending == 1 })
	errc := make(chan error, 1)
	go func() { _, err := ln.Accept(context.Background()); errc <- err }()

	start := time.Now()
	for range 2 {
		ln.Close()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v with a stalled handshake", d)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Accept = %v, want ErrClosed", err)
	}
	if got := rec.next(t); !errors.Is(got, context.Canceled) {
		t.Errorf("stalled handshake ended with %v", got)
	}
	if _, err := ln.Accept(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Accept after Close = %v", err)
	}
}

// TestSlowPeersDoNotBlock: peers that connect and stall do not delay
// another peer's handshake.
func TestSlowPeersDoNotBlock(t *testing.T) {
	checkLeaks(t)
	b := testConfig(t, testOrg)
	b.HandshakeTimeout = 10 * time.Second
	b.MaxHandshakes = 8
	ln := listen(t, "tcp", b)
	for range 5 {
		c, err := net.Dial("tcp", ln.Addr().Address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	start := time.Now()
	out, in := pair(t, ln, testConfig(t, testOrg), nil)
	if d := time.Since(start); d > time.Second {
		t.Errorf("handshake took %v behind stalled peers", d)
	}
	out.Close()
	in.Close()
}

func TestHandshakeDeadlines(t *testing.T) {
	silent := func(c net.Conn) { io.Copy(io.Discard, c) } // until the dialer gives up
	t.Run("timeout", func(t *testing.T) {
		checkLeaks(t)
		a := testConfig(t, testOrg)
		a.HandshakeTimeout = 100 * time.Millisecond
		start := time.Now()
		_, err := Dial(context.Background(), rawServer(t, silent), a, nil)
		if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("Dial = %v, want a handshake timeout", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("context-deadline", func(t *testing.T) {
		checkLeaks(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := Dial(ctx, rawServer(t, silent), testConfig(t, testOrg), nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("context-cancel", func(t *testing.T) {
		checkLeaks(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := Dial(ctx, rawServer(t, silent), testConfig(t, testOrg), nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Dial = %v, want Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v", d)
		}
	})
}

func TestSharedStaticKey(t *testing.T) {
	checkLeaks(t)
	key, err := NewStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	a.NoiseKey = key
	ln := listen(t, "tcp", b)
	for range 2 {
		out, in := pair(t, ln, a, nil)
		out.Close()
		in.Close()
	}
	// A different identity with the same static key gets its own binding.
	c := testConfig(t, testOrg)
	c.NoiseKey = key
	out, in := pair(t, ln, c, nil)
	if !in.PeerKey().Equal(keyOf(c)) {
		t.Error("wrong identity")
	}
	out.Close()
	in.Close()
}
