package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// TestKnockAcrossOrgs: a knock completes with a listener of another org
// that answers knocks. Both hooks see the other's org with Knock set; the
// responder's Refused says what it wants and the link closes, never
// accepted, even when Admit lets it through. An ordinary dial of the
// same listener still links.
func TestKnockAcrossOrgs(t *testing.T) {
	checkLeaks(t)
	cfg := testConfig(t, "acme")
	cfg.AnswerKnocks = true
	var seen atomic.Pointer[proto.HandshakePayload]
	cfg.Admit = func(p *proto.HandshakePayload) error {
		if p.Knock {
			seen.Store(p)
		}
		return nil // a knock is refused all the same
	}
	cfg.Refused = func(l *Link, err error) {
		if !errors.Is(err, ErrKnock) || !l.Peer().Knock {
			t.Errorf("Refused got %v, knock %v", err, l.Peer().Knock)
		}
		l.Send([]byte("pending"))
	}
	ln := listen(t, "tcp", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	kc := testConfig(t, "org-fresh")
	kc.Knock = true
	var answered *proto.HandshakePayload
	kc.Admit = func(p *proto.HandshakePayload) error { answered = p; return nil }
	kc.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{Name: "laptop", Fresh: []byte{1}} }
	out, err := Dial(ctx, ln.Addr(), kc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if answered == nil || answered.Org != "acme" || !answered.Knock || !answered.Identity.Equal(keyOf(cfg)) {
		t.Fatalf("the knocking side saw %+v", answered)
	}
	c := newCollector(4)
	out.Start(c.handle)
	if f := c.next(t); string(f) != "pending" {
		t.Fatalf("got %q", f)
	}
	waitDone(t, out, 5*time.Second)
	p := seen.Load()
	if p == nil || p.Org != "org-fresh" || p.Name != "laptop" || len(p.Fresh) != 1 {
		t.Fatalf("the responder saw %+v", p)
	}
	// No knock reached Accept; an ordinary member dial does.
	in, _ := pair(t, ln, testConfig(t, "acme"), nil)
	if in == nil || in.Peer().Knock {
		t.Fatal("ordinary dial after a knock")
	}
}

// TestKnockRefusedWithoutAnswerKnocks: a listener that does not answer
// knocks (as meshd before knocks) closes at message 1; an ordinary
// handshake never carries a fresh roster.
func TestKnockRefusedWithoutAnswerKnocks(t *testing.T) {
	checkLeaks(t)
	ln := listen(t, "tcp", testConfig(t, "acme"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kc := testConfig(t, "org-fresh")
	kc.Knock = true
	if _, err := Dial(ctx, ln.Addr(), kc, nil); !errors.Is(err, ErrHandshake) {
		t.Fatalf("knock at a listener that does not answer knocks: %v", err)
	}
	// Same org, not a knock: Fresh is left out of our payload.
	dc := testConfig(t, "acme")
	dc.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{Fresh: []byte{1}} }
	out, in := pair(t, ln, dc, nil)
	if out == nil || in.Peer().Fresh != nil {
		t.Fatalf("fresh roster sent outside a knock: %+v", in.Peer())
	}
}
