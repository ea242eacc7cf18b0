//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestAttachmentNineReaders measures one 64 MiB attachment sent to a
// channel of nine readers (alice the sender and nine others, all on
// loopback; the channel eager size is set above the file's so every
// reader fetches it as the message arrives): the chunks each node
// served, so the copies' worth alice uploaded, and that all nine hold a
// verified copy. It asserts the goal of issue 31: alice uploads at most 3
// copies' worth. It runs only with MESHD_BENCH_ATTACH=1 (MESHD_BENCH_ARGS
// adds meshd flags); docs/BENCHMARKS.md has the figures.
func TestAttachmentNineReaders(t *testing.T) {
	if os.Getenv("MESHD_BENCH_ATTACH") != "1" {
		t.Skip("set MESHD_BENCH_ATTACH=1 to measure")
	}
	const size = 64 << 20
	names := []string{"alice"}
	for i := 1; i <= 9; i++ {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	args := append([]string{"--attachment-channel-eager-max-kib", "70000"}, strings.Fields(os.Getenv("MESHD_BENCH_ARGS"))...)
	m := newLoopbackFaultMesh(t, names, args...)
	m.channel("data")
	file, data := randomFile(t, meshTempDir(t), "data.bin", size, 13)
	start := time.Now()
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "send", "#data", "64 MiB", "--attach", file)
	for i := 1; i < len(names); i++ {
		p := m.attachedPath(i, sent.ID, "data.bin", 10*time.Minute)
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s's copy: %v (%d bytes)", names[i], err, len(got))
		}
		got = nil
	}
	took := time.Since(start)
	chunks := uint64(proto.ChunkCount(size))
	var all uint64
	for i, name := range names {
		n := m.counter(i, "blob.chunks_served")
		all += n
		t.Logf("%s served %d chunks (%.2f copies' worth; %d from a part in progress), %d not-yet answers, peak RSS %s",
			name, n, float64(n)/float64(chunks), m.counter(i, "blob.part_chunks_served"), m.counter(i, "blob.not_yet_sent"),
			peakRSS(m.ds[i].cmd.Process.Pid))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("all nine readers hold verified copies after %v; %d chunks served in all (%.2f copies); load average %s",
		took, all, float64(all)/float64(chunks), strings.TrimSpace(string(load)))
	if n := m.counter(0, "blob.chunks_served"); n > 3*chunks {
		t.Fatalf("alice served %d chunks, over 3 copies' worth (%d)", n, 3*chunks)
	}
}
