//go:build linux

package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
)

// TestAttachmentChunksPassReceiveLimit: the chunks a node asks for are
// not paced by its link receive limit (PROTOCOL.md §13.5): 12 MiB reach
// bob, whose links read at most 1 MiB/s, in far less than the 8 s the
// limit would take after its 4 MiB burst, and bob counts them as read
// within the receive credit. Envelopes on that link are still paced (the
// transport tests prove that, and that unsolicited chunks are).
func TestAttachmentChunksPassReceiveLimit(t *testing.T) {
	m := newLoopbackFaultMesh(t, []string{"alice", "bob"}, "--link-recv-rate-mib", "1")
	file, data := randomFile(t, t.TempDir(), "big.bin", 12<<20, 21)
	start := time.Now()
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "dm", "bob", "12 MiB", "--attach", file)
	path := m.attachedPath(1, sent.ID, "big.bin", 60*time.Second)
	took := time.Since(start)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("attachment: %v (%d bytes)", err, len(got))
	}
	credited := m.counter(1, "link.recv_credited_bytes")
	t.Logf("12 MiB in %v at a 1 MiB/s receive limit; bob: link.recv_credited_bytes %d", took, credited)
	if credited < 12<<20 {
		t.Errorf("bob read %d chunk bytes within the credit, want the whole 12 MiB", credited)
	}
	if took > 6*time.Second {
		t.Errorf("12 MiB took %v: the chunks were paced at the 1 MiB/s receive limit", took)
	}
}
