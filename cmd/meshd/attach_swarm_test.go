//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestAttachmentReadersServeEachOther: a 1.5 MiB attachment (six chunks)
// to a channel of three readers, fetched eagerly by all three. Each
// reader asks the sender only for its own stripe and the other readers
// for theirs, so readers serve one another chunks, most of them from a
// part they are still fetching; all three hold verified copies.
func TestAttachmentReadersServeEachOther(t *testing.T) {
	testpar.Parallel(t)
	names := []string{"alice", "bob", "carol", "dave"}
	m := newLoopbackFaultMesh(t, names, "--attachment-channel-eager-max-kib", "2048")
	m.channel("data")
	file, data := randomFile(t, t.TempDir(), "sample.bin", 3<<19, 31)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "send", "#data", "a sample", "--attach", file)
	for i := 1; i < len(names); i++ {
		p := m.attachedPath(i, sent.ID, "sample.bin", 60*time.Second)
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s's copy: %v (%d bytes)", names[i], err, len(got))
		}
	}
	var byReaders, fromParts uint64
	for i := 1; i < len(names); i++ {
		byReaders += m.counter(i, "blob.chunks_served")
		fromParts += m.counter(i, "blob.part_chunks_served")
	}
	alice := m.counter(0, "blob.chunks_served")
	t.Logf("alice served %d chunks, the readers %d (%d from a part in progress)", alice, byReaders, fromParts)
	if byReaders == 0 {
		t.Fatalf("the readers served no chunk to one another (alice served %d)", alice)
	}
	if alice+byReaders < 3*6 {
		t.Fatalf("%d chunks served in all, fewer than the three copies' 18", alice+byReaders)
	}
}

// TestAttachmentPartNotServedToNonReader: a node holding a part of a
// blob in progress (its fetch from the raw member got the chunk list and
// chunk 0, and waits for chunk 1) serves that part to a member that may
// read a message naming the blob (chunk 0, and "not yet" for chunk 1),
// and answers unavailable, with no chunk, to the same member asking
// under a channel message it may not read.
func TestAttachmentPartNotServedToNonReader(t *testing.T) {
	testpar.Parallel(t)
	r := startRawTarget(t, "", "mallory", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctlOK(t, r.meshctl, "--home", r.home, "channel", "create", "drop", "--readers", "role:admin")
	var show struct {
		ID string `json:"id"`
	}
	meshctlJSON(t, r.meshctl, &show, "--home", r.home, "channel", "show", "drop")
	content := bytes.Repeat([]byte("part"), (proto.ChunkSize+1000)/4)
	size, sum, root, hashes, err := proto.Digest(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	a := proto.Attachment{Name: "p.bin", Size: size, MediaType: "application/octet-stream", SHA256: sum, ChunkRoot: root}

	// mallory serves the chunk list and chunk 0, never chunk 1; what the
	// node answers mallory's own wants goes to answers.
	answers := make(chan *proto.BlobChunk, 256)
	l := r.dial(t, 10*time.Second)
	defer l.Close()
	serveFrame := func(c *proto.BlobChunk) {
		b, err := proto.Marshal(c)
		if err == nil {
			_ = l.SendBulk(append([]byte{byte(proto.FrameBlobChunk)}, b...))
		}
	}
	l.Start(func(f []byte) {
		switch {
		case len(f) > 0 && proto.FrameType(f[0]) == proto.FrameBlobWant:
			w, err := proto.ParseBlobWant(f[1:])
			if err != nil {
				return
			}
			if len(w.Chunks) == 0 {
				var list []byte
				for _, h := range hashes {
					list = append(list, h[:]...)
				}
				serveFrame(&proto.BlobChunk{SHA256: sum, What: proto.BlobChunkList, Data: list})
			}
			for _, i := range w.Chunks {
				if i == 0 {
					serveFrame(&proto.BlobChunk{SHA256: sum, What: proto.BlobChunkData, Data: content[:proto.ChunkSize]})
				}
			}
		case len(f) > 0 && proto.FrameType(f[0]) == proto.FrameBlobChunk:
			if c, err := proto.ParseBlobChunk(f[1:]); err == nil {
				answers <- c
			}
		}
	})
	epoch := proto.NewEpoch()
	envelope := func(seq uint64, to proto.Destination) uuid.UUID {
		t.Helper()
		se, err := proto.SignEnvelope(r.key, &proto.Envelope{ID: proto.NewID(), From: r.pub, To: to, Kind: proto.KindMessage,
			TS: time.Now().UnixMilli(), TTL: 300, Seq: seq, Epoch: epoch,
			Message: &proto.Message{Body: "a file", Attachments: []proto.Attachment{a}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, se.Raw...)); err != nil {
			t.Fatal(err)
		}
		return se.ID
	}
	toDrop := envelope(1, proto.ToChannel(uuid.MustParse(show.ID))) // mallory writes #drop but may not read it
	toNode := envelope(2, proto.ToPeer(r.target))
	ask := func(id uuid.UUID, chunks ...uint32) {
		t.Helper()
		b, err := proto.Marshal(&proto.BlobWant{From: r.pub, ID: id, SHA256: sum, Chunks: chunks})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Send(append([]byte{byte(proto.FrameBlobWant)}, b...)); err != nil {
			t.Fatal(err)
		}
	}
	next := func(within time.Duration) *proto.BlobChunk {
		t.Helper()
		select {
		case c := <-answers:
			return c
		case <-time.After(within):
			t.Fatalf("no blob-chunk answer within %v", within)
			return nil
		}
	}

	// Under the DM, the node serves its part: chunk 0 once it holds it,
	// and "not yet" for chunk 1. (Until the DM is stored, the answer is
	// unavailable.)
	if !testwait.Until(20*time.Second, func() bool {
		ask(toNode, 0, 1)
		c := next(10 * time.Second)
		if c.What == proto.BlobUnavailable {
			return false
		}
		c1 := next(10 * time.Second)
		if c.What == proto.BlobChunkData && !bytes.Equal(c.Data, content[:proto.ChunkSize]) {
			t.Fatal("chunk 0 served differs")
		}
		if c1.What != proto.BlobNotYet || c1.Index != 1 {
			t.Fatalf("chunk 1 asked under the DM: answer kind %d index %d, want 4 (not yet) for 1", c1.What, c1.Index)
		}
		return c.What == proto.BlobChunkData && c.Index == 0
	}) {
		t.Fatal("the node never served chunk 0 of its part")
	}

	// Under #drop, which mallory may not read: unavailable, and nothing
	// else before the answer to the next ask (frames arrive in order).
	before := counters(t, r.meshctl, r.home)["blob.refused"]
	ask(toDrop, 0, 1)
	if c := next(10 * time.Second); c.What != proto.BlobUnavailable {
		t.Fatalf("asking under #drop: answer kind %d, want 3 (unavailable)", c.What)
	}
	ask(toDrop)
	if c := next(10 * time.Second); c.What != proto.BlobUnavailable {
		t.Fatalf("asking for the list under #drop: answer kind %d, want 3 (unavailable)", c.What)
	}
	ask(toNode, 1)
	if c := next(10 * time.Second); c.What != proto.BlobNotYet || c.Index != 1 {
		t.Fatalf("after the refusals: answer kind %d index %d, want 4 (not yet) for 1", c.What, c.Index)
	}
	if n := counters(t, r.meshctl, r.home)["blob.refused"]; n != before+2 {
		t.Fatalf("blob.refused went from %d to %d, want +2", before, n)
	}
}

// TestAttachmentOlderNode: one node of a channel runs an older meshd
// (MESHD_OLD_BIN), which serves only whole blobs, fetches from one
// source at a time and takes a "not yet" for a malformed frame
// (PROTOCOL.md §13.5, older nodes): once a reader, whose stripe the newer
// readers ask it for first and get from the sender when it answers
// unavailable; once the sender, which drops the wants beyond the 4 it
// serves instead of answering "not yet". All three readers end with
// verified copies either way.
func TestAttachmentOlderNode(t *testing.T) {
	old := os.Getenv("MESHD_OLD_BIN")
	if old == "" {
		t.Skip("set MESHD_OLD_BIN to a meshd built before blob-chunk what 4")
	}
	for _, older := range []int{1, 0} {
		t.Run([]string{"sender", "reader"}[older], func(t *testing.T) { olderNodeRun(t, old, older) })
	}
}

func olderNodeRun(t *testing.T, old string, older int) {
	names := []string{"alice", "bob", "carol", "dave"}
	m := newLoopbackFaultMesh(t, names, "--attachment-channel-eager-max-kib", "2048")
	if err := m.ds[older].stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	newer := m.cmd
	m.cmd = func(i int) *exec.Cmd {
		c := newer(i)
		if i == older {
			c.Path, c.Args[0] = old, old
		}
		return c
	}
	m.start(older)
	for i := range names {
		waitPeers(t, m.meshctl, m.homes[i], len(names)-1, 30*time.Second)
	}
	m.channel("data")
	file, data := randomFile(t, t.TempDir(), "sample.bin", 3<<19, 32)
	var sent api.Sent
	meshctlJSON(t, m.meshctl, &sent, "--home", m.homes[0], "send", "#data", "a sample", "--attach", file)
	for i := 1; i < len(names); i++ {
		p := m.attachedPath(i, sent.ID, "sample.bin", 90*time.Second)
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s's copy: %v (%d bytes)", names[i], err, len(got))
		}
	}
	for i, name := range names {
		t.Logf("%s served %d chunks", name, m.counter(i, "blob.chunks_served"))
	}
}
