package node

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

func TestDMLeavesQueueOnlyWhenAcked(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	a := m.start(0)

	// b is a raw link that records envelopes, with the number of the link
	// each came on, and never acknowledges. a may send the DM more than
	// once on a link (its link-up flush and sendDirect both send a DM
	// queued as the link comes up, and a periodic flush re-sends what is
	// unacknowledged): the test counts links that carried it, not copies.
	var mu sync.Mutex
	var got []*proto.SignedEnvelope
	var on []int // on[i]: the link got[i] came on
	links := 0
	dialB := func() *transport.Link {
		mu.Lock()
		links++
		this := links
		mu.Unlock()
		cfg := transport.DefaultConfig()
		cfg.Identity = m.ids[1].Key
		cfg.Org = "acme"
		cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: m.roster.Version} }
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ak := m.ids[0].Pub
		l, err := transport.Dial(ctx, tcpAddr(t, a), cfg, &ak)
		if err != nil {
			t.Fatal(err)
		}
		l.Start(func(f []byte) {
			if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameEnvelope {
				if se, err := proto.ParseEnvelope(append([]byte(nil), f[1:]...)); err == nil && se.Kind == proto.KindMessage {
					mu.Lock()
					got, on = append(got, se), append(on, this)
					mu.Unlock()
				}
			}
		})
		return l
	}
	// count is how many envelopes came on link number link.
	count := func(link int) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, l := range on {
			if l == link {
				k++
			}
		}
		return k
	}
	l := dialB()
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })
	sent, err := a.out.Send(api.Send{To: "b", Body: "are you there"})
	if err != nil {
		t.Fatal(err)
	}
	if sent.Queued {
		t.Fatalf("sent to a linked peer reported as queued: %+v", sent)
	}
	waitFor(t, 5*time.Second, "DM on the wire", func() bool { return count(1) > 0 })
	// No ack: still kept.
	pending, err := a.store.Pending(m.ids[1].Pub)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %d (%v), want 1 while unacknowledged", len(pending), err)
	}
	// The link dies; on the next link the DM is sent again.
	l.Close()
	waitFor(t, 5*time.Second, "link down", func() bool { return !linked(a, m.ids[1].Pub) })
	l = dialB()
	defer l.Close()
	waitFor(t, 5*time.Second, "DM re-sent on relink", func() bool { return count(2) > 0 })
	mu.Lock()
	for _, se := range got[1:] {
		if se.ID != got[0].ID {
			t.Fatalf("re-sent a different envelope: %s vs %s", got[0].ID, se.ID)
		}
	}
	mu.Unlock()
	// An ack from b clears it. It lists the id twice, as a peer does
	// that committed two copies of the DM in one batch: one
	// acknowledgement, counted once.
	b, err := proto.Marshal(&proto.Ack{IDs: []uuid.UUID{got[0].ID, got[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Send(append([]byte{byte(proto.FrameAck)}, b...)); err != nil {
		t.Fatal(err)
	}
	// The count follows the store's write: wait for both.
	waitFor(t, 5*time.Second, "queue cleared by the ack, and the ack counted", func() bool {
		p, err := a.store.Pending(m.ids[1].Pub)
		return err == nil && len(p) == 0 && a.metrics.Get("tx.acked") > 0
	})
	// The count follows the removal in the same call: wait for it, then
	// check it is one.
	waitFor(t, 5*time.Second, "the ack counted", func() bool { return a.metrics.Get("tx.acked") > 0 })
	if got := a.metrics.Get("tx.acked"); got != 1 {
		t.Errorf("tx.acked = %d after one DM acked (its id listed twice), want 1", got)
	}
}

func TestDMAckedBetweenNodes(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	a := m.start(0)
	m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "link", func() bool { return linked(a, m.ids[1].Pub) })
	if _, err := a.out.Send(api.Send{To: "b", Body: "hello"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "acked", func() bool { return a.metrics.Get("tx.acked") == 1 })
	if p, err := a.store.Pending(m.ids[1].Pub); err != nil || len(p) != 0 {
		t.Fatalf("pending after ack: %d (%v)", len(p), err)
	}
}

// ackRecorder collects the ids of the acks a link receives.
type ackRecorder struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (r *ackRecorder) handle(f []byte) {
	if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameAck {
		if a, err := proto.ParseAck(f[1:]); err == nil {
			r.mu.Lock()
			r.ids = append(r.ids, a.IDs...)
			r.mu.Unlock()
		}
	}
}

func (r *ackRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// A DM re-sent after a lost ack is acknowledged again, not just dropped.
func TestDuplicateDMIsAckedAgain(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	var acks ackRecorder
	rig.relink(acks.handle) // a new link that records the acks a sends back
	ak := rig.m.ids[0].Pub
	b := rig.key(1)
	e := rig.env(b, proto.ToPeer(ak), proto.KindMessage, nil)
	raw := rig.signed(b, e)
	count := acks.count
	rig.inject(raw)
	waitFor(t, 5*time.Second, "first ack", func() bool { return count() == 1 })
	rig.inject(raw)
	waitFor(t, 5*time.Second, "second ack for the duplicate", func() bool { return count() == 2 })
}

// A copy of a held DM whose signature is broken is neither acknowledged
// nor counted as a duplicate: an ack means "stored", and these bytes were
// never signed by their sender (§16.3). An exact copy is acked again.
func TestCorruptCopyOfHeldDMNotAcked(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	var acks ackRecorder
	rig.relink(acks.handle)
	ak := rig.m.ids[0].Pub
	b := rig.key(1)
	raw := rig.signed(b, rig.env(b, proto.ToPeer(ak), proto.KindMessage, nil))
	count := acks.count
	metric := func(r rx.Drop) uint64 { return rig.a.metrics.Get("drop." + r.String()) }

	rig.inject(raw)
	waitFor(t, 5*time.Second, "ack for the DM", func() bool { return count() == 1 })

	for i, flip := range []int{len(raw) - 1, len(raw) - 40} { // two bytes of the signature
		bad := append([]byte(nil), raw...)
		bad[flip] ^= 0x80
		sigs, dups := metric(rx.DropBadSignature), metric(rx.DropDuplicate)
		rig.inject(bad)
		waitFor(t, 5*time.Second, "drop.bad_signature", func() bool { return metric(rx.DropBadSignature) == sigs+1 })
		if got := metric(rx.DropDuplicate); got != dups {
			t.Fatalf("forged copy %d counted as a duplicate: %d -> %d", i, dups, got)
		}
	}
	// The exact copy is acked; frames and acks keep their order on the
	// link, so an ack for a forged copy would have arrived before it.
	dups := metric(rx.DropDuplicate)
	rig.inject(raw)
	waitFor(t, 5*time.Second, "ack for the exact copy", func() bool { return count() >= 2 })
	waitFor(t, 5*time.Second, "drop.duplicate", func() bool { return metric(rx.DropDuplicate) == dups+1 })
	if got := count(); got != 2 { // an ack for a forged copy would have come first
		t.Fatalf("%d acks, want 2: one for the DM and one for its exact copy", got)
	}
}

// A DM sent while the link to its peer comes up is sent on that link,
// not left in the queue until the next periodic flush (30 s): the link's
// first flush can run between the sender's check for a link and the store
// of the DM in the queue.
func TestDMSentWhileLinkComesUp(t *testing.T) {
	t.Parallel()
	m := newTestMesh(t, 2)
	m.writeRoster(0, m.roster)
	m.writeRoster(1, m.roster)
	// a's address, not yet listening: b dials it in vain until a starts.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := transport.Addr{Network: "tcp", Address: l.Addr().String()}
	l.Close()
	var a, b *Node
	b = m.startHooked(1, &testHooks{queue: func(up bool) {
		if up {
			t.Error("linked before a started")
			return
		}
		// The link comes up, and its first flush finds the queue empty.
		a = m.startWith(0, func(c *Config) { c.Listen = []transport.Addr{addr} })
		waitFor(t, 5*time.Second, "link", func() bool { return linked(b, m.ids[0].Pub) && linked(a, m.ids[1].Pub) })
		time.Sleep(100 * time.Millisecond) // deliberate: the link's first flush runs before the store
	}}, nil, addr)
	sent, err := b.out.Send(api.Send{To: "a", Body: "while the link comes up"})
	if err != nil {
		t.Fatal(err)
	}
	if a == nil {
		t.Fatal("the queue hook did not run")
	}
	if sent.Queued || len(sent.SentTo) != 1 {
		t.Errorf("sent %+v: want it sent on the new link", sent)
	}
	waitFor(t, 5*time.Second, "DM at a", func() bool {
		items, err := a.store.Inbox(history.InboxFilter{})
		return err == nil && len(items) == 1
	})
}
