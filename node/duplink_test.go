package node

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/transport"
)

// frameLog records the frames a link receives, by type, and the ids of
// the envelopes among them, in order.
type frameLog struct {
	mu     sync.Mutex
	types  map[proto.FrameType]int
	envIDs []string
}

func (r *frameLog) handle(f []byte) {
	if len(f) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.types == nil {
		r.types = map[proto.FrameType]int{}
	}
	r.types[proto.FrameType(f[0])]++
	if proto.FrameType(f[0]) == proto.FrameEnvelope {
		if se, err := proto.ParseEnvelope(f[1:]); err == nil {
			r.envIDs = append(r.envIDs, se.ID.String())
		}
	}
}

// has reports whether ids all arrived, and returns the positions of
// their first arrivals and how often each arrived.
func (r *frameLog) has(ids []string) (all bool, pos, count []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos, count = make([]int, len(ids)), make([]int, len(ids))
	all = true
	for i, id := range ids {
		pos[i] = -1
		for j, got := range r.envIDs {
			if got == id {
				if pos[i] < 0 {
					pos[i] = j
				}
				count[i]++
			}
		}
		if pos[i] < 0 {
			all = false
		}
	}
	return all, pos, count
}

func (r *frameLog) count(t proto.FrameType) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.types[t]
}

// pipeLink links member i to n over net.Pipe and registers n's end as an
// admitted link, as the accept loop does. Member i's end is returned
// unstarted: nothing reads it, so n's writer blocks on its first write
// and every later frame stays in n's send queue.
func pipeLink(t *testing.T, m *testMesh, n *Node, i int) (nEnd, peerEnd *transport.Link) {
	t.Helper()
	c1, c2 := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type res struct {
		l   *transport.Link
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := transport.Server(ctx, c2, n.peers.LinkConfig())
		ch <- res{l, err}
	}()
	cfg := transport.DefaultConfig()
	cfg.Identity = m.ids[i].Key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: m.roster.Version} }
	key := n.id.Pub
	peerEnd, err := transport.Client(ctx, c1, cfg, &key)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { peerEnd.CloseWithError(nil); r.l.CloseWithError(nil) })
	n.peers.AddLink(r.l)
	return r.l, peerEnd
}

// TestDuplicateLoserFramesMoveToWinner: channel messages queued on a link
// that then loses a duplicate pair, and that its peer never reads, reach
// the peer on the winning link, at once (the peer here runs no history
// catch-up, so nothing else could bring them), in order and once each;
// the loser's goodbye stays on the loser.
func TestDuplicateLoserFramesMoveToWinner(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	a, bkey := rig.a, rig.m.ids[1].Pub
	loser, _ := pipeLink(t, rig.m, a, 1)
	waitFor(t, 5*time.Second, "the pipe link registered", func() bool {
		a.peers.Lock()
		defer a.peers.Unlock()
		cur := a.peers.LinkedLocked(bkey)
		return cur != nil && cur.Conn == loser
	})
	// The writer takes a first batch of link-up frames (it counts them as
	// it seals them) and blocks writing it to a pipe nobody reads: every
	// frame queued from now on stays queued.
	waitFor(t, 5*time.Second, "the writer holding its first batch", func() bool {
		return loser.Stats().FramesOut > 0
	})
	var ids []string
	for i := range 3 {
		sent, err := a.out.Send(api.Send{To: "#general", Body: "queued on the loser " + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sent.ID)
	}
	if q, _ := loser.QueueLen(); q < len(ids) {
		t.Fatalf("the loser's queue holds %d frames, want the %d messages", q, len(ids))
	}
	moved := a.metrics.Get("link.rehomed_frames")

	// b links again; the new link has another Noise static key (as after
	// a restart), so it wins.
	var got frameLog
	rig.relink(got.handle)
	waitFor(t, 5*time.Second, "the messages on the winning link", func() bool {
		all, _, _ := got.has(ids)
		return all
	})
	_, pos, count := got.has(ids)
	for i := range ids {
		if count[i] != 1 {
			t.Errorf("message %d arrived %d times on the winner", i, count[i])
		}
		if i > 0 && pos[i] < pos[i-1] {
			t.Errorf("message %d arrived before message %d: %v", i, i-1, pos)
		}
	}
	if d := a.metrics.Get("link.rehomed_frames") - moved; d < uint64(len(ids)) {
		t.Errorf("link.rehomed_frames rose by %d, want at least %d", d, len(ids))
	}
	select {
	case <-loser.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the loser is still open")
	}
	if n := got.count(proto.FrameGoodbye); n != 0 {
		t.Errorf("the winner carried %d goodbye frames", n)
	}
}

// TestDuplicateNewLoserIsRead: when the link b opens second loses to the
// one a holds (same process, so the same Noise static key, and the higher
// session id), a still reads what b sent on it before b saw the goodbye:
// b may have registered that link first and sent on it. The channel
// message b sends on the losing link right after its handshake reaches a.
func TestDuplicateNewLoserIsRead(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	a, bkey, b := rig.a, rig.m.ids[1].Pub, rig.key(1)
	static, err := transport.NewStaticKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := transport.DefaultConfig()
	cfg.Identity = b
	cfg.Org = "acme"
	cfg.NoiseKey = static // one process: one static key on all its links
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: rig.m.roster.Version} }
	akey := a.id.Pub
	dial := func(first []byte) (*transport.Link, chan struct{}) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := transport.Dial(ctx, tcpAddr(t, a), cfg, &akey)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if first != nil {
			if err := l.Send(first); err != nil {
				t.Fatal(err)
			}
		}
		bye := make(chan struct{})
		var once sync.Once
		l.Start(func(f []byte) {
			if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameGoodbye {
				once.Do(func() { close(bye) })
			}
		})
		return l, bye
	}
	registered := func() [32]byte {
		a.peers.Lock()
		defer a.peers.Unlock()
		if cur := a.peers.LinkedLocked(bkey); cur != nil {
			return cur.Conn.SessionID()
		}
		return [32]byte{}
	}
	kept, keptBye := dial(nil)
	waitFor(t, 5*time.Second, "b's first link registered", func() bool { return registered() == kept.SessionID() })

	// A new link loses when its session id is above the kept one's: half
	// of them. Dial until one does.
	stored := channelCount(a, rig.general.ID)
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("20 links from b, none lost the duplicate pair")
		}
		e := rig.env(b, proto.ToChannel(rig.general.ID), proto.KindMessage, func(e *proto.Envelope) { e.Seq = uint64(attempt + 2) })
		l, bye := dial(append([]byte{byte(proto.FrameEnvelope)}, rig.signed(b, e)...))
		select {
		case <-bye:
		case <-keptBye:
		case <-time.After(5 * time.Second):
			t.Fatal("no goodbye on either link")
		}
		if registered() != kept.SessionID() {
			// The new link won: a said goodbye on the old one. Both
			// messages sent so far must arrive all the same.
			kept, keptBye = l, bye
			waitFor(t, 5*time.Second, "the new link registered", func() bool { return registered() == l.SessionID() })
			stored++
			waitFor(t, 5*time.Second, "the message sent on the winning link", func() bool { return channelCount(a, rig.general.ID) == stored })
			continue
		}
		stored++
		waitFor(t, 5*time.Second, "the message sent on the losing link", func() bool { return channelCount(a, rig.general.ID) == stored })
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the losing link is still open")
		}
		if d := a.metrics.Get("link.duplicate"); d == 0 {
			t.Fatal("link.duplicate not counted")
		}
		return
	}
}
