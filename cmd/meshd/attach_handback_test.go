//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// TestAttachmentBusyServerHandsSlotBack: four members keep the node's
// four serving slots busy, each with a queue of wants it refills as
// answers come, and each reading its link at 4 MiB/s with no credit, so
// that the node's sends to it wait and its queue never runs dry. A fifth member's
// want is refused ("not yet") for want of a slot; a link being served
// then gives its slot back after the want in hand, and the fifth
// member's next asks are served within seconds. Without the hand-back
// the four would keep the slots as long as they kept asking.
func TestAttachmentBusyServerHandsSlotBack(t *testing.T) {
	testpar.Parallel(t)
	const (
		busy        = 4  // the node's serving slots (blobServeConcurrency)
		chunks      = 32 // of the file
		perWant     = 16 // 4 MiB: eight of them are more than the link and its socket buffer hold
		outstanding = 8  // wants a busy member keeps asked: one served, the rest queued (at most 8)
	)
	names := []string{"m0", "m1", "m2", "m3", "late"}
	const late = busy
	r, keys := startRawTargetMembers(t, "", names, "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	file, data := randomFile(t, t.TempDir(), "shared.bin", chunks*proto.ChunkSize, 11)
	sum := sha256.Sum256(data)
	ids := make([]uuid.UUID, len(names))
	for i, n := range names {
		var sent api.Sent
		meshctlJSON(t, r.meshctl, &sent, "--home", r.home, "dm", n, "the file, for "+n, "--attach", file)
		ids[i] = uuid.MustParse(sent.ID)
	}

	type answer struct {
		data  bool
		index uint32
		body  []byte // the late member's only
	}
	links := make([]*transport.Link, len(names))
	answers := make([]chan answer, len(names))
	for i := range names {
		ch := make(chan answer, 4096)
		answers[i] = ch
		slow := func(c *transport.Config) {
			if i < busy {
				c.RecvRate = 4 << 20
			}
		}
		l := r.dialAs(t, keys[i], 10*time.Second, slow)
		l.Start(func(f []byte) {
			if len(f) == 0 || proto.FrameType(f[0]) != proto.FrameBlobChunk {
				return // the DM, and what else the node sends
			}
			c, err := proto.ParseBlobChunk(f[1:])
			if err != nil {
				t.Errorf("%s: %v", names[i], err)
				return
			}
			a := answer{data: c.What == proto.BlobChunkData, index: c.Index}
			if i == late {
				a.body = bytes.Clone(c.Data)
			}
			ch <- a
		})
		t.Cleanup(func() { l.Close() })
		links[i] = l
	}
	ask := func(i int, idx []uint32) error {
		b, err := proto.Marshal(&proto.BlobWant{From: r.target, ID: ids[i], SHA256: sum, Chunks: idx})
		if err != nil {
			return err
		}
		if i == late {
			links[i].GrantRecv(len(idx) * (proto.ChunkSize + 1024))
		}
		return links[i].Send(append([]byte{byte(proto.FrameBlobWant)}, b...))
	}

	// The busy four: each keeps `outstanding` wants asked, asking the next
	// as soon as one has its answers.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served [busy]atomic.Int64
	for i := range busy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := uint32(0)
			askNext := func() bool {
				idx := make([]uint32, perWant)
				for k := range idx {
					idx[k] = next % chunks
					next++
				}
				return ask(i, idx) == nil
			}
			for range outstanding {
				if !askNext() {
					return
				}
			}
			for got := 0; ; {
				select {
				case <-stop:
					return
				case a := <-answers[i]:
					if a.data {
						served[i].Add(1)
					}
					if got++; got == perWant { // a want answered (one link's wants are served in order)
						got = 0
						if !askNext() {
							return
						}
					}
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	if !testwait.Until(15*time.Second, func() bool {
		for i := range busy {
			if served[i].Load() == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the four busy members were not all served: %d %d %d %d chunks",
			served[0].Load(), served[1].Load(), served[2].Load(), served[3].Load())
	}

	// The fifth asks for one chunk, and again 50 ms after each "not yet",
	// as a fetch does after blobNotYetRetry.
	start := time.Now()
	for tries := 0; ; tries++ {
		if err := ask(late, []uint32{7}); err != nil {
			t.Fatal(err)
		}
		var a answer
		select {
		case a = <-answers[late]:
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to the late member's want %d within 10 s", tries+1)
		}
		if a.data {
			if tries == 0 {
				t.Fatalf("the late member's first want was served (after %v): the four did not hold every slot, so nothing was handed back",
					time.Since(start).Round(time.Millisecond))
			}
			if a.index != 7 || !bytes.Equal(a.body, data[7*proto.ChunkSize:8*proto.ChunkSize]) {
				t.Fatalf("chunk %d answered (%d bytes), not chunk 7 of the file", a.index, len(a.body))
			}
			t.Logf("the late member was served after %d refusals, %v after its first want; the busy four had %d, %d, %d and %d chunks",
				tries, time.Since(start).Round(time.Millisecond), served[0].Load(), served[1].Load(), served[2].Load(), served[3].Load())
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the late member was refused %d times in %v while four members kept every slot", tries+1, time.Since(start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond) // deliberate: the asker's retry pace
	}
}
