package peers

import (
	"context"
	"crypto/ed25519"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// fakeHost is a Host that records what the service tells it.
type fakeHost struct {
	self     proto.PubKey
	mu       sync.Mutex
	members  map[proto.PubKey]bool
	refuse   bool
	ups      chan Up
	downs    chan Down
	frames   chan []byte
	rejected chan Rejection
	roster   *roster.Roster
	counts   [NumCounters]atomic.Uint64
	failed   atomic.Int64 // frames reported refused (SendFailed)
}

func newFakeHost(self proto.PubKey) *fakeHost {
	return &fakeHost{self: self, members: map[proto.PubKey]bool{self: true},
		ups: make(chan Up, 4), downs: make(chan Down, 4), frames: make(chan []byte, 4), rejected: make(chan Rejection, 4)}
}

func (h *fakeHost) Self() proto.PubKey { return h.self }
func (h *fakeHost) Member(k proto.PubKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.members[k]
}
func (h *fakeHost) Admit(l *transport.Link) bool {
	if h.refuse {
		_ = l.Close()
		return false
	}
	return true
}
func (h *fakeHost) LinkUp(u Up)                              { h.ups <- u }
func (h *fakeHost) Frame(_ *Link, f []byte)                  { h.frames <- f }
func (h *fakeHost) LinkDown(d Down)                          { h.downs <- d }
func (h *fakeHost) Rejected(_ *transport.Link, r Rejection)  { h.rejected <- r }
func (h *fakeHost) Rehomed(*Link, int, []proto.FrameType)    {}
func (h *fakeHost) Roster() *roster.Roster                   { return h.roster }
func (h *fakeHost) SendFailed(*Link, proto.FrameType, error) { h.failed.Add(1) }
func (h *fakeHost) Count(c Counter, n uint64)                { h.counts[c].Add(n) }
func (h *fakeHost) Resend(*Link)                             {}
func (h *fakeHost) OtherOrg(OtherOrg)                        {}
func (h *fakeHost) Knocked(*transport.Link)                  {}
func (h *fakeHost) setMember(k proto.PubKey, member bool) {
	h.mu.Lock()
	h.members[k] = member
	h.mu.Unlock()
}
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// serviceRig is a service and the identity of a peer that links to it
// over net.Pipe.
type serviceRig struct {
	svc     *Service
	host    *fakeHost
	srvCfg  transport.Config
	peerKey ed25519.PrivateKey
	peerPub proto.PubKey
	selfPub proto.PubKey
}

func newServiceRig(t *testing.T) *serviceRig {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ppub, ppriv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &serviceRig{peerKey: ppriv, peerPub: proto.PubKey(ppub), selfPub: proto.PubKey(pub)}
	r.host = newFakeHost(r.selfPub)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r.svc = NewService(r.host, ServiceConfig{Context: ctx, Group: &wg, BackoffMin: time.Second, BackoffMax: time.Minute})
	r.srvCfg = transport.DefaultConfig()
	r.srvCfg.Identity = priv
	r.srvCfg.Org = "acme"
	t.Cleanup(func() { cancel(); wg.Wait() })
	return r
}

// link runs a handshake over net.Pipe and hands the service's end to
// AddLink. It returns the peer's end, started, and the service's end.
func (r *serviceRig) link(t *testing.T) (peerEnd, svcEnd *transport.Link) {
	t.Helper()
	c1, c2 := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch := make(chan *transport.Link, 1)
	go func() {
		l, err := transport.Server(ctx, c2, r.srvCfg)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	cfg := transport.DefaultConfig()
	cfg.Identity = r.peerKey
	cfg.Org = "acme"
	peerEnd, err := transport.Client(ctx, c1, cfg, &r.selfPub)
	if err != nil {
		t.Fatal(err)
	}
	svcEnd = <-ch
	if svcEnd == nil {
		t.FailNow()
	}
	peerEnd.Start(func([]byte) {})
	t.Cleanup(func() { peerEnd.CloseWithError(nil); svcEnd.CloseWithError(nil) })
	r.svc.AddLink(svcEnd)
	return peerEnd, svcEnd
}

func (r *serviceRig) linked() *Link {
	r.svc.Lock()
	defer r.svc.Unlock()
	return r.svc.LinkedLocked(r.peerPub)
}

// TestServiceLinkLife: a member's link is registered and the host told
// (link up, each frame, link down), and the table forgets it once it
// ends.
func TestServiceLinkLife(t *testing.T) {
	r := newServiceRig(t)
	r.host.setMember(r.peerPub, true)
	peerEnd, svcEnd := r.link(t)
	up := recv(t, r.host.ups, "link up")
	if up.Link.Conn != svcEnd || up.Replaced || r.linked() != up.Link {
		t.Fatalf("link up %+v, registered %v", up, r.linked())
	}
	if err := peerEnd.Send([]byte{byte(proto.FrameAck), 7}); err != nil {
		t.Fatal(err)
	}
	if f := recv(t, r.host.frames, "frame"); len(f) != 2 || f[1] != 7 {
		t.Fatalf("frame %x", f)
	}
	_ = peerEnd.Close()
	d := recv(t, r.host.downs, "link down")
	if d.Link != up.Link || d.Closing {
		t.Fatalf("link down %+v", d)
	}
	if r.linked() != nil {
		t.Fatal("the ended link is still registered")
	}
}

// TestServiceRejects: a link the host does not admit, or from a peer
// not in the roster, is closed and never registered nor reported up.
func TestServiceRejects(t *testing.T) {
	r := newServiceRig(t)
	r.host.refuse = true
	r.host.setMember(r.peerPub, true)
	_, svcEnd := r.link(t)
	<-svcEnd.Done()
	if r.linked() != nil || len(r.host.ups) > 0 {
		t.Fatal("a link the host refused was registered")
	}

	r.host.refuse = false
	r.host.setMember(r.peerPub, false)
	_, svcEnd = r.link(t)
	if got := recv(t, r.host.rejected, "rejection"); got != NotMember {
		t.Fatalf("rejected as %v, want NotMember", got)
	}
	<-svcEnd.Done()
	if r.linked() != nil || len(r.host.ups) > 0 {
		t.Fatal("a non-member's link was registered")
	}
}

// TestServiceNewProcessWins: a second link from the peer, from a new
// process (another Noise static key), replaces the first, which is
// retired with a goodbye.
func TestServiceNewProcessWins(t *testing.T) {
	r := newServiceRig(t)
	r.host.setMember(r.peerPub, true)
	_, first := r.link(t)
	recv(t, r.host.ups, "first link up")
	_, second := r.link(t)
	up := recv(t, r.host.ups, "second link up")
	if up.Link.Conn != second || !up.Replaced || r.linked() != up.Link {
		t.Fatalf("second link up %+v", up)
	}
	<-first.Done()
	if d := recv(t, r.host.downs, "the first link down"); d.Link.Conn != first {
		t.Fatalf("link down %+v", d)
	}
	if r.linked() != up.Link {
		t.Fatal("the retired link's end cleared the winner")
	}
}

// TestSessionFrameOnRetiredLink: a frame of a link's own session (a peer
// list) that finds the link closed because it lost a duplicate pair is
// not reported refused: the winner's link-up sends it afresh. The same
// frame on a link closed for any other reason is.
func TestSessionFrameOnRetiredLink(t *testing.T) {
	r := newServiceRig(t)
	r.host.setMember(r.peerPub, true)
	_, firstEnd := r.link(t)
	first := recv(t, r.host.ups, "first link up").Link
	r.link(t)
	second := recv(t, r.host.ups, "second link up").Link
	<-firstEnd.Done()
	if !first.Retired() || second.Retired() {
		t.Fatalf("retired: loser %v, winner %v", first.Retired(), second.Retired())
	}
	r.svc.Send(first, proto.FramePeers, []byte{0xa0})
	if n := r.host.failed.Load(); n != 0 {
		t.Fatalf("a session frame on the retired loser reported refused (%d)", n)
	}
	second.Conn.CloseWithError(nil)
	<-second.Conn.Done()
	r.svc.Send(second, proto.FramePeers, []byte{0xa0})
	if n := r.host.failed.Load(); n != 1 {
		t.Fatalf("a session frame on a closed link reported %d times, want 1", n)
	}
}
