package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
)

// TestHostilePeers throws garbage, a stalled handshake and oversized
// frames at a real meshd's listener: each connection is closed, each
// failure is logged with its reason and counted, and the node keeps
// serving (a legitimate status call and a real link still work).
func TestHostilePeers(t *testing.T) {
	testpar.Parallel(t)
	meshd, meshctl := buildBinaries(t)
	h := filepath.Join(t.TempDir(), "target")
	d := startDaemon(t, meshd, h, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	addr := strings.TrimPrefix(tcpListen(t, waitStatus(t, meshctl, h, d)), "tcp://")

	closedWithin := func(name string, c net.Conn, within time.Duration) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: connection still open after %v", name, within)
		}
		c.Close()
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// Garbage: a length prefix and random bytes that are no Noise message.
	c := dial()
	c.Write(append([]byte{0x00, 0x20}, bytes.Repeat([]byte{0xAB}, 32)...))
	c.Write(bytes.Repeat([]byte{0xFF}, 1000))
	closedWithin("garbage", c, 5*time.Second)

	// Oversized: a handshake record claiming 65535 bytes where 32 are allowed.
	c = dial()
	var hdr [2]byte
	binary.BigEndian.PutUint16(hdr[:], 65535)
	c.Write(hdr[:])
	closedWithin("oversized record", c, 5*time.Second)

	// Stalled: connect and say nothing; the handshake deadline (5 s) ends it.
	c = dial()
	closedWithin("stalled handshake", c, 10*time.Second)

	// The node still serves, counted every failure, and logged reasons.
	var s struct {
		Counters map[string]uint64 `json:"counters"`
	}
	out := meshctlOK(t, meshctl, "--home", h, "status", "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Counters["handshake.failed"] < 3 {
		t.Fatalf("handshake.failed = %d, want 3: %v", s.Counters["handshake.failed"], s.Counters)
	}
	// One line per reason (the two protocol violations share one: the
	// log allows a line per source and reason each 10 s). A line comes
	// through the daemon's stderr pipe a moment after the close it logs.
	var log string
	if !testwait.Until(10*time.Second, func() bool {
		log = d.stderr.String()
		return strings.Contains(log, `msg="handshake failed"`) && strings.Contains(log, "reason=protocol") &&
			strings.Contains(log, "reason=timeout")
	}) {
		t.Fatalf("failures not logged with reasons:\n%s", log)
	}
	if r := meshctlRun(t, meshctl, "--home", h, "status"); r.code != 0 {
		t.Fatalf("status after hostile peers: %+v", r)
	}
}
