package main

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/internal/testpar"
	"github.com/meshd/meshd/internal/testwait"
	"github.com/meshd/meshd/proto"
)

// TestForgedCopyOfHeldDMNotAcked drives a real meshd over a real link as
// a roster member: a DM is acked; a copy of it whose signature is broken
// is counted as drop.bad_signature and not acked; an exact copy is acked
// again and counted as drop.duplicate (PROTOCOL.md §16.3).
func TestForgedCopyOfHeldDMNotAcked(t *testing.T) {
	testpar.Parallel(t)
	rt := startRawTarget(t, "", "raw", "--listen", "tcp://127.0.0.1:0", "--no-mdns")
	meshctl, h, d, key, me, target := rt.meshctl, rt.home, rt.d, rt.key, rt.pub, rt.target
	l := rt.dial(t, 5*time.Second)
	defer l.Close()
	var mu sync.Mutex
	var acked []uuid.UUID
	l.Start(func(f []byte) {
		if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameAck {
			if a, err := proto.ParseAck(f[1:]); err == nil {
				mu.Lock()
				acked = append(acked, a.IDs...)
				mu.Unlock()
			}
		}
	})
	acks := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	counter := func(name string) uint64 {
		var st struct {
			Counters map[string]uint64 `json:"counters"`
		}
		if err := json.Unmarshal([]byte(meshctlOK(t, meshctl, "--home", h, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return st.Counters[name]
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		if !testwait.Until(10*time.Second, cond) {
			t.Fatalf("timed out waiting for %s\n%s", what, d.stderr.String())
		}
	}
	send := func(raw []byte) {
		t.Helper()
		if err := l.Send(append([]byte{byte(proto.FrameEnvelope)}, raw...)); err != nil {
			t.Fatal(err)
		}
	}

	se, err := proto.SignEnvelope(key, &proto.Envelope{ID: proto.NewID(), From: me, To: proto.ToPeer(target),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
		Message: &proto.Message{Body: "the original"}})
	if err != nil {
		t.Fatal(err)
	}
	send(se.Raw)
	wait("ack for the DM", func() bool { return acks() == 1 })

	forged := append([]byte(nil), se.Raw...)
	forged[len(forged)-1] ^= 0x01 // the last byte is in the signature
	send(forged)
	wait("drop.bad_signature", func() bool { return counter("drop.bad_signature") == 1 })
	if n := counter("drop.duplicate"); n != 0 {
		t.Fatalf("forged copy counted as a duplicate (drop.duplicate %d)", n)
	}

	// Acks keep the order of the frames they answer: an ack for the
	// forged copy would arrive before the exact copy's.
	send(se.Raw)
	wait("ack for the exact copy", func() bool { return acks() >= 2 })
	wait("drop.duplicate", func() bool { return counter("drop.duplicate") == 1 })
	// A later DM's ack comes after any the copies would still draw.
	next, err := proto.SignEnvelope(key, &proto.Envelope{ID: proto.NewID(), From: me, To: proto.ToPeer(target),
		Kind: proto.KindMessage, TS: time.Now().UnixMilli(), TTL: 300, Seq: 2, Epoch: se.Envelope.Epoch,
		Message: &proto.Message{Body: "a later one"}})
	if err != nil {
		t.Fatal(err)
	}
	send(next.Raw)
	wait("ack for the later DM", func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(acked, next.Envelope.ID) })
	mu.Lock()
	defer mu.Unlock()
	if want := []uuid.UUID{se.Envelope.ID, se.Envelope.ID, next.Envelope.ID}; !slices.Equal(acked, want) {
		t.Fatalf("acks %v, want %v (the DM, its exact copy, the later DM)", acked, want)
	}
}
