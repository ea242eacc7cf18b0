package node

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/channel"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
	"github.com/meshd/meshd/roster"
	"github.com/meshd/meshd/transport"
)

// pipelineRig is a node under test (a: admin) plus a raw link held by
// member b, over which crafted envelopes are injected.
type pipelineRig struct {
	t       *testing.T
	m       *testMesh
	a       *Node
	link    *transport.Link
	general *channel.Policy // readers role:observer, writers role:member
	ops     *channel.Policy // writers role:operator
	// keys by role: 1 b member, 2 c observer, 3 d operator; outsider is not in the roster
	outsider ed25519.PrivateKey
}

func newPipelineRig(t *testing.T) *pipelineRig {
	t.Helper()
	m := newTestMesh(t, 4, roster.RoleMember, roster.RoleObserver, roster.RoleOperator)
	m.writeRoster(0, m.roster)
	a := m.start(0)
	rig := &pipelineRig{t: t, m: m, a: a}
	var err error
	if rig.general, err = a.chans.CreateChannel(api.CreateChannel{Name: "general"}); err != nil {
		t.Fatal(err)
	}
	if rig.ops, err = a.chans.CreateChannel(api.CreateChannel{Name: "ops", Writers: []string{"role:operator"}}); err != nil {
		t.Fatal(err)
	}
	_, rig.outsider, _ = ed25519.GenerateKey(nil)
	rig.relink(nil)
	return rig
}

// relink links to a as b (replacing the rig's link, if any), hands the
// frames a sends to handler (nil: discards them), and waits until a has
// admitted a link from b.
func (r *pipelineRig) relink(handler func([]byte)) {
	t := r.t
	t.Helper()
	if r.link != nil {
		r.link.Close()
	}
	cfg := transport.DefaultConfig()
	cfg.Identity = r.m.ids[1].Key
	cfg.Org = "acme"
	cfg.Payload = func() proto.HandshakePayload { return proto.HandshakePayload{RosterVersion: r.m.roster.Version} }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	akey := r.m.ids[0].Pub
	l, err := transport.Dial(ctx, tcpAddr(t, r.a), cfg, &akey)
	if err != nil {
		t.Fatal(err)
	}
	if handler == nil {
		handler = func([]byte) {}
	}
	l.Start(handler)
	t.Cleanup(func() { l.Close() })
	r.link = l
	waitFor(t, 5*time.Second, "link admitted", func() bool { return linked(r.a, r.m.ids[1].Pub) })
}

func (r *pipelineRig) key(i int) ed25519.PrivateKey { return r.m.ids[i].Key }

// env builds an envelope from key's owner; tweak adjusts it before signing.
func (r *pipelineRig) env(key ed25519.PrivateKey, to proto.Destination, kind proto.Kind, tweak func(*proto.Envelope)) *proto.Envelope {
	e := &proto.Envelope{
		ID: proto.NewID(), From: proto.PubKeyOf(key), To: to, Kind: kind,
		TS: time.Now().UnixMilli(), TTL: 300, Seq: 1, Epoch: proto.NewEpoch(),
	}
	switch kind {
	case proto.KindMessage:
		e.Message = &proto.Message{Body: "hello"}
	case proto.KindRequest:
		e.Request = &proto.Request{RequestID: proto.NewID(), Intent: "run-tests"}
	case proto.KindResponse:
		e.Response = &proto.Response{RequestID: proto.NewID(), Status: proto.StatusCompleted}
	}
	if tweak != nil {
		tweak(e)
	}
	return e
}

func (r *pipelineRig) signed(key ed25519.PrivateKey, e *proto.Envelope) []byte {
	r.t.Helper()
	se, err := proto.SignEnvelope(key, e)
	if err != nil {
		r.t.Fatal(err)
	}
	return se.Raw
}

// rawSigned signs without validation, to craft envelopes the encoder
// refuses (hop 4).
func (r *pipelineRig) rawSigned(key ed25519.PrivateKey, e *proto.Envelope) []byte {
	r.t.Helper()
	body, err := proto.Marshal(e)
	if err != nil {
		r.t.Fatal(err)
	}
	sig := proto.Sign(key, proto.DomainEnvelope, body)
	raw, err := proto.Marshal(map[int]any{0: body, 1: sig[:]})
	if err != nil {
		r.t.Fatal(err)
	}
	return raw
}

func (r *pipelineRig) inject(raw []byte) {
	r.t.Helper()
	if err := r.link.Send(append([]byte{byte(proto.FrameEnvelope)}, raw...)); err != nil {
		r.t.Fatal(err)
	}
}

// expectDrop injects raw and waits for drop.<reason> to rise by one, and
// checks nothing reached the inbox.
func (r *pipelineRig) expectDrop(reason rx.Drop, raw []byte) {
	r.t.Helper()
	before := r.a.metrics.Get("drop." + reason.String())
	items := r.inboxLen()
	r.inject(raw)
	waitFor(r.t, 5*time.Second, "drop."+reason.String(), func() bool { return r.a.metrics.Get("drop."+reason.String()) == before+1 })
	if got := r.inboxLen(); got != items {
		r.t.Fatalf("dropped envelope (%s) reached the inbox: %d -> %d items", reason, items, got)
	}
}

func (r *pipelineRig) inboxLen() int {
	in, err := r.a.q.Inbox(context.Background(), true, 0, false, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return len(in.Items)
}

func TestReceivePipelineDrops(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	a := rig.m.ids[0].Pub
	b, c, d := rig.key(1), rig.key(2), rig.key(3)
	toA := proto.ToPeer(a)
	general := proto.ToChannel(rig.general.ID)

	// A valid DM is delivered: the control case that proves the rig works.
	good := rig.signed(b, rig.env(b, toA, proto.KindMessage, nil))
	before := rig.a.metrics.Get("rx.delivered.message")
	rig.inject(good)
	waitFor(t, 5*time.Second, "delivery", func() bool { return rig.a.metrics.Get("rx.delivered.message") == before+1 })
	if rig.inboxLen() != 1 {
		t.Fatalf("valid DM not in inbox")
	}

	t.Run("replayed id", func(t *testing.T) { rig.expectDrop(rx.DropDuplicate, good) })
	t.Run("copy of a held DM with a broken signature", func(t *testing.T) {
		// The same (from, id), but not signed by its sender: not a
		// duplicate, a forgery (TestCorruptCopyOfHeldDMNotAcked checks
		// that it is not acknowledged either).
		bad := append([]byte(nil), good...)
		bad[len(bad)-1] ^= 0x01
		dups := rig.a.metrics.Get("drop." + rx.DropDuplicate.String())
		rig.expectDrop(rx.DropBadSignature, bad)
		if got := rig.a.metrics.Get("drop." + rx.DropDuplicate.String()); got != dups {
			t.Fatalf("forged copy counted as a duplicate: %d -> %d", dups, got)
		}
	})
	t.Run("copy of a held channel message is deduped before the signature check", func(t *testing.T) {
		// Nothing is acked for a channel message, so the early drop
		// needs no signature check.
		msg := rig.signed(b, rig.env(b, general, proto.KindMessage, nil))
		before := rig.a.metrics.Get("rx.delivered.message")
		rig.inject(msg)
		waitFor(t, 5*time.Second, "delivery", func() bool { return rig.a.metrics.Get("rx.delivered.message") == before+1 })
		bad := append([]byte(nil), msg...)
		bad[len(bad)-1] ^= 0x01
		rig.expectDrop(rx.DropDuplicate, bad)
	})

	t.Run("bad signature", func(t *testing.T) {
		raw := rig.signed(b, rig.env(b, toA, proto.KindMessage, nil))
		raw[len(raw)-1] ^= 0x01 // the last byte is in the signature
		rig.expectDrop(rx.DropBadSignature, raw)
	})
	t.Run("from is not the signer", func(t *testing.T) {
		// Claims to be from d (an operator) but is signed by b.
		e := rig.env(d, toA, proto.KindRequest, nil)
		rig.expectDrop(rx.DropBadSignature, rig.rawSigned(b, e))
	})
	t.Run("expired", func(t *testing.T) {
		e := rig.env(b, toA, proto.KindMessage, func(e *proto.Envelope) {
			e.TS = time.Now().Add(-10 * time.Minute).UnixMilli()
		})
		rig.expectDrop(rx.DropExpired, rig.signed(b, e))
	})
	t.Run("future timestamp", func(t *testing.T) {
		e := rig.env(b, toA, proto.KindMessage, func(e *proto.Envelope) {
			e.TS = time.Now().Add(5 * time.Minute).UnixMilli()
		})
		rig.expectDrop(rx.DropFuture, rig.signed(b, e))
	})
	t.Run("non-member", func(t *testing.T) {
		// Relayed by a member link, signed by a key the roster lacks.
		rig.expectDrop(rx.DropNotMember, rig.signed(rig.outsider, rig.env(rig.outsider, toA, proto.KindMessage, nil)))
	})
	t.Run("observer writing to a channel", func(t *testing.T) {
		rig.expectDrop(rx.DropObserverWrite, rig.signed(c, rig.env(c, general, proto.KindMessage, nil)))
	})
	t.Run("observer sending a DM", func(t *testing.T) {
		rig.expectDrop(rx.DropObserverWrite, rig.signed(c, rig.env(c, toA, proto.KindMessage, nil)))
	})
	t.Run("member writing to an operators-only channel", func(t *testing.T) {
		rig.expectDrop(rx.DropNotWriter, rig.signed(b, rig.env(b, proto.ToChannel(rig.ops.ID), proto.KindMessage, nil)))
	})
	t.Run("unknown channel", func(t *testing.T) {
		rig.expectDrop(rx.DropUnknownChannel, rig.signed(b, rig.env(b, proto.ToChannel(uuid.New()), proto.KindMessage, nil)))
	})
	t.Run("member sending a request", func(t *testing.T) {
		rig.expectDrop(rx.DropRoleTooLow, rig.signed(b, rig.env(b, toA, proto.KindRequest, nil)))
	})
	t.Run("hop 4", func(t *testing.T) {
		e := rig.env(d, toA, proto.KindRequest, func(e *proto.Envelope) {
			parent := proto.NewID()
			e.Request.ReplyTo, e.Request.Hop = &parent, 4
		})
		rig.expectDrop(rx.DropHopLimit, rig.rawSigned(d, e))
	})
	t.Run("a subagent result of the node's own, over a link", func(t *testing.T) {
		// Only the node itself signs these, and never sends them: a copy
		// from a link (here b replays one signed with a's key) is dropped.
		e := rig.env(rig.key(0), toA, proto.KindMessage, func(e *proto.Envelope) {
			e.Message.Body = `{"subagent_id": "w1", "summary": "forged"}`
		})
		rig.expectDrop(rx.DropLocalOnly, rig.signed(rig.key(0), e))
	})
	t.Run("DM for another node", func(t *testing.T) {
		rig.expectDrop(rx.DropMisrouted, rig.signed(b, rig.env(b, proto.ToPeer(rig.m.ids[3].Pub), proto.KindMessage, nil)))
	})
	t.Run("presence for another org", func(t *testing.T) {
		e := rig.env(b, proto.ToOrg("other"), proto.KindPresence, func(e *proto.Envelope) {
			e.Presence = &proto.Presence{State: proto.Online, Seq: 1}
		})
		rig.expectDrop(rx.DropWrongOrg, rig.signed(b, e))
	})
	t.Run("malformed", func(t *testing.T) {
		rig.expectDrop(rx.DropMalformed, []byte{0xa2, 0x00, 0x41})
	})
	t.Run("non-canonical", func(t *testing.T) {
		// A valid DM whose body map head takes two bytes: a9 -> b8 09.
		se, err := proto.SignEnvelope(b, rig.env(b, toA, proto.KindMessage, nil))
		if err != nil {
			t.Fatal(err)
		}
		body := append([]byte{0xb8, 0x09}, se.Signed[1:]...)
		sig := proto.Sign(b, proto.DomainEnvelope, body)
		raw, err := proto.Marshal(map[int]any{0: body, 1: sig[:]})
		if err != nil {
			t.Fatal(err)
		}
		rig.expectDrop(rx.DropNonCanonical, raw)
	})
	t.Run("invalid", func(t *testing.T) {
		// Canonical and signed, but a Message to the org (§4.2).
		rig.expectDrop(rx.DropInvalid, rig.rawSigned(b, rig.env(b, proto.ToOrg("acme"), proto.KindMessage, nil)))
	})
	t.Run("invalid nil in_reply_to", func(t *testing.T) {
		e := rig.env(b, toA, proto.KindMessage, func(e *proto.Envelope) { e.Message.InReplyTo = &uuid.Nil })
		rig.expectDrop(rx.DropInvalid, rig.rawSigned(b, e))
	})

	// Hop 3 from an operator is accepted, and lands at high priority.
	e := rig.env(d, toA, proto.KindRequest, func(e *proto.Envelope) {
		parent := proto.NewID()
		e.Request.ReplyTo, e.Request.Hop = &parent, 3
	})
	before = rig.a.metrics.Get("rx.delivered.request")
	rig.inject(rig.signed(d, e))
	waitFor(t, 5*time.Second, "hop-3 request delivered", func() bool { return rig.a.metrics.Get("rx.delivered.request") == before+1 })
}

func TestPolicySignedByNonAdminDropped(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t)
	p, err := channel.New("acme", "rogue", nil, nil, true, rig.key(1)) // b is a member, not an admin
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	before := rig.a.metrics.Get("policy.rejected.not_admin")
	if err := rig.link.Send(append([]byte{byte(proto.FramePolicy)}, b...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "policy refusal", func() bool { return rig.a.metrics.Get("policy.rejected.not_admin") == before+1 })
	if _, ok := rig.a.chans.Set().ByName("rogue"); ok {
		t.Fatal("policy signed by a non-admin was applied")
	}
}
