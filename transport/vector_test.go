package transport

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshd/meshd/proto"
)

var update = flag.Bool("update", false, "rewrite testdata/handshake-vector.txt")

// recConn records everything written through it.
type recConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *recConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(b)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recConn) written() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// splitRecords splits a byte stream into its records, prefixes kept.
func splitRecords(b []byte) [][]byte {
	var out [][]byte
	r := bytes.NewReader(b)
	for {
		rec, err := readRecord(r, make([]byte, maxRecord))
		if err != nil {
			return out
		}
		out = append(out, append([]byte{byte(len(rec) >> 8), byte(len(rec))}, rec...))
	}
}

// TestHandshakeVector pins a whole handshake and the first transport
// record in each direction, with fixed identity seeds, static keys and
// ephemeral keys, so another implementation can check itself against
// testdata/handshake-vector.txt. Run with -update to regenerate after a
// deliberate wire change.
func TestHandshakeVector(t *testing.T) {
	t.Parallel()
	fixed := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	mk := func(idSeed, static, eph byte, name string) *endpoint {
		dh, err := cipherSuite.GenerateKeypair(bytes.NewReader(fixed(static)))
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{
			Identity: ed25519.NewKeyFromSeed(fixed(idSeed)),
			Org:      "vector-org",
			NoiseKey: &StaticKey{dh: dh},
			Payload: func() proto.HandshakePayload {
				return proto.HandshakePayload{RosterVersion: 1, Name: name}
			},
		}
		e, err := newEndpoint(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.random = bytes.NewReader(fixed(eph))
		return e
	}
	ini := mk(0x01, 0x02, 0x03, "initiator")
	res := mk(0x11, 0x12, 0x13, "responder")

	c1, c2 := net.Pipe()
	r1, r2 := &recConn{Conn: c1}, &recConn{Conn: c2}
	ctx := context.Background()
	var in *Link
	var serr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		in, serr = res.server(ctx, r2)
	}()
	out, err := ini.client(ctx, r1, nil)
	wg.Wait()
	if err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	defer out.Close()
	defer in.Close()
	got := make(chan []byte, 2)
	in.Start(func(f []byte) { in.Send(append([]byte("re: "), f...)) })
	out.Start(func(f []byte) { got <- f })
	out.Send([]byte("hi"))
	if f := <-got; string(f) != "re: hi" {
		t.Fatalf("echo %q", f)
	}

	up, down := splitRecords(r1.written()), splitRecords(r2.written())
	if len(up) < 3 || len(down) < 2 {
		t.Fatalf("%d records up, %d down", len(up), len(down))
	}
	var sb strings.Builder
	line := func(k string, v []byte) { fmt.Fprintf(&sb, "%s: %x\n", k, v) }
	sb.WriteString("# meshd link handshake vector: Noise_XX_25519_ChaChaPoly_SHA256.\n")
	sb.WriteString("# Records are shown with their 2-byte big-endian length prefix.\n")
	sb.WriteString("# X25519 private keys and Ed25519 seeds are 32 repeated bytes.\n")
	fmt.Fprintf(&sb, "prologue: %x\n", proto.Prologue("vector-org"))
	line("initiator_identity_seed", fixed(0x01))
	line("initiator_static_private", fixed(0x02))
	line("initiator_ephemeral_private", fixed(0x03))
	line("responder_identity_seed", fixed(0x11))
	line("responder_static_private", fixed(0x12))
	line("responder_ephemeral_private", fixed(0x13))
	line("initiator_payload", mustPayload(t, ini, true))
	line("responder_payload", mustPayload(t, res, false))
	line("message_1", up[0])
	line("message_2", down[0])
	line("message_3", up[1])
	hash := out.SessionID()
	line("handshake_hash", hash[:])
	sb.WriteString("# first transport record each way: frame \"hi\" and its echo \"re: hi\"\n")
	line("initiator_transport_0", up[2])
	line("responder_transport_0", down[1])
	text := sb.String()

	path := filepath.Join("testdata", "handshake-vector.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != text {
		t.Errorf("handshake transcript differs from %s:\n%s", path, text)
	}
}

func mustPayload(t *testing.T, e *endpoint, initiator bool) []byte {
	b, err := e.localPayload(initiator)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
