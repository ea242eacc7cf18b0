package peers

import (
	"context"
	"crypto/ed25519"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshd/meshd/internal/bubble"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
	"github.com/meshd/meshd/transport/memnet"
)

// Connection management's timers on synctest's clock, over the in-memory
// network (transport/memnet): a test waits minutes of backoff in
// microseconds and asserts the instant of each dial, which real time on
// a loaded machine cannot.

// dialClock is a fakeHost that notes the instant of each dial attempt.
type dialClock struct {
	*fakeHost
	mu    sync.Mutex
	dials []time.Time
}

func (h *dialClock) Count(c Counter, n uint64) {
	if c == DialAttempt {
		h.mu.Lock()
		h.dials = append(h.dials, time.Now())
		h.mu.Unlock()
	}
	h.fakeHost.Count(c, n)
}

func (h *dialClock) attempts() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.dials...)
}

// bubbleService starts a service of a one-member roster on host ip of
// nw, with the node's default backoff (250 ms to 5 s) and a dial timeout
// of 3 s (below the handshake's 5 s, so that it is the one a dial that
// gets no answer waits out), inside the calling bubble; it stops with
// the test.
func bubbleService(t *testing.T, nw *memnet.Network, ip netip.Addr) (*Service, *dialClock) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &dialClock{fakeHost: newFakeHost(proto.PubKeyOf(priv))}
	if h.roster, err = roster.New("acme", priv, "self"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	svc := NewService(h, ServiceConfig{Context: ctx, Group: &wg, BackoffMin: 250 * time.Millisecond,
		BackoffMax: 5 * time.Second, DialTimeout: 3 * time.Second, ExchangeInterval: 30 * time.Second})
	lc := transport.DefaultConfig()
	lc.Identity, lc.Org, lc.Net = priv, "acme", nw.Host(ip)
	svc.SetLinkConfig(lc)
	svc.Start()
	t.Cleanup(func() {
		svc.Lock()
		svc.Closed = true
		svc.Unlock()
		cancel()
		wg.Wait()
	})
	return svc, h
}

// TestSynctestDialBackoff: a member whose address refuses is dialled on
// its schedule to the instant: the first dial put off by the first-dial
// spread (FirstDialDelay), then after each failure a delay drawn from
// [d/2, d], d doubling from BackoffMin up to BackoffMax; after
// MaxSelfFails failures its address is evicted and the dials stop.
func TestSynctestDialBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc, h := bubbleService(t, memnet.New(), netip.MustParseAddr("192.0.2.1"))
		// A peer whose NodeID is lower: its dial would win the duplicate
		// rule, so ours is put off past the spread and the lead.
		peer := proto.PubKeyOf(newPeerKey(t))
		for h.self.NodeID().Less(peer.NodeID()) {
			peer = proto.PubKeyOf(newPeerKey(t))
		}
		start := addMember(svc, h, peer, "tcp://192.0.2.2:7946")
		bubble.Advance(time.Hour) // an hour of the bubble's clock
		synctest.Wait()

		dials := h.attempts()
		if len(dials) != MaxSelfFails {
			t.Fatalf("%d dials in an hour, want %d (then the address is evicted)", len(dials), MaxSelfFails)
		}
		spread := DialSpread(1)
		lo, hi := spread+dialLead, 2*spread+dialLead
		if first := dials[0].Sub(start); first < lo || first >= hi {
			t.Errorf("first dial after %v, want within [%v, %v)", first, lo, hi)
		}
		for i := 1; i < len(dials); i++ {
			d := min(250*time.Millisecond<<i, 5*time.Second)
			if gap := dials[i].Sub(dials[i-1]); gap < d/2 || gap > d {
				t.Errorf("dial %d came %v after the one before, want within [%v, %v]", i+1, gap, d/2, d)
			}
		}
		if n := h.counts[DialFailed].Load(); n != MaxSelfFails {
			t.Errorf("%d failed dials counted, want %d", n, MaxSelfFails)
		}
		svc.Lock()
		left := svc.ByKey[peer].Addrs.Len()
		svc.Unlock()
		if left != 0 {
			t.Errorf("the address that failed %d times is still in the book", MaxSelfFails)
		}
	})
}

// TestSynctestDialBackoffRecovers: a member that listens again while its
// dials back off is linked by the next dial due, at the instant its
// backoff ends, not sooner and not later.
func TestSynctestDialBackoffRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		svc, h := bubbleService(t, nw, netip.MustParseAddr("192.0.2.1"))
		peerPriv := newPeerKey(t)
		peer := proto.PubKeyOf(peerPriv)
		addr := "tcp://192.0.2.2:7946"
		addMember(svc, h, peer, addr)
		for len(h.attempts()) < 5 {
			bubble.Advance(time.Millisecond) // a step of the bubble's clock
			synctest.Wait()
		}
		svc.Lock()
		due := svc.ByKey[peer].Next
		svc.Unlock()

		pc := transport.DefaultConfig()
		pc.Identity, pc.Org, pc.Net = peerPriv, "acme", nw.Host(netip.MustParseAddr("192.0.2.2"))
		ln, err := transport.Listen(context.Background(), mustParse(t, addr), pc)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if l, err := ln.Accept(context.Background()); err == nil {
				l.Start(func([]byte) {})
			}
		}()
		up := <-h.ups
		if up.Link.Key != peer {
			t.Fatalf("linked %v, want the member", up.Link.Key.Fingerprint())
		}
		if at := time.Now(); !at.Equal(due) {
			t.Errorf("linked %v after the dial was due", at.Sub(due))
		}
		if n := len(h.attempts()); n != 6 {
			t.Errorf("linked on dial %d, want 6", n)
		}
		up.Link.Conn.Close()
		<-h.downs
	})
}

// addMember makes peer a member whose own address is addr and wakes the
// dialler; it returns when.
func addMember(svc *Service, h *dialClock, peer proto.PubKey, addr string) time.Time {
	h.setMember(peer, true)
	svc.Lock()
	svc.MergeAddrsLocked(peer, []string{addr}, Self)
	svc.Unlock()
	svc.Wake()
	return time.Now()
}

func newPeerKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return priv
}

func mustParse(t *testing.T, s string) transport.Addr {
	t.Helper()
	a, err := transport.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSynctestDialUnreachable: a member whose host does not answer (the
// way to it is cut: memnet.Cut) costs one dial per backoff, each held
// for exactly DialTimeout before it fails; the next starts the backoff
// after that failure, not after the dial's start.
func TestSynctestDialUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New()
		self, far := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		nw.Cut(self, far)
		svc, h := bubbleService(t, nw, self)
		peer := proto.PubKeyOf(newPeerKey(t))
		addMember(svc, h, peer, "tcp://192.0.2.2:7946")
		bubble.Advance(2 * time.Minute) // two minutes of the bubble's clock
		synctest.Wait()

		dials := h.attempts()
		if len(dials) < 5 {
			t.Fatalf("%d dials in two minutes", len(dials))
		}
		timeout := svc.cfg.DialTimeout
		for i := 1; i < len(dials); i++ {
			d := min(250*time.Millisecond<<i, 5*time.Second)
			if gap := dials[i].Sub(dials[i-1]); gap < timeout+d/2 || gap > timeout+d {
				t.Errorf("dial %d came %v after the one before, want within [%v, %v]", i+1, gap, timeout+d/2, timeout+d)
			}
		}
		if n := h.counts[DialFailed].Load(); n != uint64(len(dials)) && n != uint64(len(dials)-1) {
			t.Errorf("%d failed dials counted for %d started", n, len(dials))
		}
	})
}
