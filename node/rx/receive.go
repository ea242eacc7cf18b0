package rx

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// Receive runs the receive pipeline on one wire envelope and, if it
// passes, delivers it. It reports whether the envelope was delivered.
func (p *Pipeline) Receive(raw []byte, src Source) bool {
	p.host.Count(Received, 1)
	// 0. Parse: size cap, strict decoding, canonical form, validity.
	se, err := proto.ParseEnvelope(raw)
	if err != nil {
		p.Drop(parseDrop(err), nil, src, err)
		return false
	}
	// Step 7's dedupe first where the id is known (§15 allows it): a replay
	// costs a map lookup, not a 56 µs signature check. Presence is deduped
	// by its own seq instead.
	if se.Kind != proto.KindPresence {
		if seen, err := p.cfg.Store.Seen(se.From, se.ID); err == nil && seen {
			return p.held(se, src)
		}
	}
	if p.overBudget(se) {
		p.refuseOverBudget(se, src) // as the commit stage would, unacked
		return false
	}
	// 1. Signature, over the received bytes, by the key in from.
	if err := se.Verify(); err != nil {
		p.Drop(DropBadSignature, se, src, err)
		return false
	}
	// 2. TTL and clock skew; history sync skips only the expiry check.
	now := time.Now()
	p.cfg.Clock.ObserveFutureClock(se.From, se.Time(), src.FromSender(se.From), now)
	if se.Time().After(now.Add(proto.MaxClockSkew)) {
		p.Drop(DropFuture, se, src, nil)
		return false
	}
	if !src.History && se.Expires().Before(now) {
		p.Drop(DropExpired, se, src, nil)
		return false
	}
	if !TTLWithinHorizon(se) {
		p.Drop(DropTTLTooLong, se, src, nil)
		return false
	}
	// 3. The sender must be in the current roster.
	r := p.cfg.Roster.Current()
	role, ok := r.Role(se.From)
	if !ok {
		p.Drop(senderRefusal(r, se.From), se, src, nil)
		return false
	}
	if !src.History {
		// A history envelope says nothing of whether its sender is online.
		p.cfg.Presence.Touch(se.From, now)
	}
	// 5, 6. Destination and ACL, and the request rules, per kind (step 4,
	// peer announcements, is node/peers').
	if reason := p.authorize(r, role, se); reason != DropNone {
		p.Drop(reason, se, src, nil)
		return false
	}
	// A member's channel Messages past its quota here are refused.
	if p.cfg.Chans.OverQuota(se, src.History, now) {
		p.Drop(DropQuota, se, src, nil)
		return false
	}
	// 7. Dedupe and deliver as passive data.
	return p.deliver(se, src, now)
}

// held drops a copy of an envelope the store holds already. A re-sent
// DM we hold is acked again: its sender missed our ack. A copy is acked
// only if it verifies (§16.3): anyone can forge an unsigned copy of a
// held id, and an ack for it would tell the sender that bytes it never
// signed were stored. Channel copies are not acked again: their ack only
// counts a reader, which the first one did.
func (p *Pipeline) held(se *proto.SignedEnvelope, src Source) bool {
	if se.To.Kind == proto.DestPeer && p.cfg.Acks.Ackable(se, src.Link, src.History) {
		if err := se.Verify(); err != nil {
			p.Drop(DropBadSignature, se, src, err)
			return false
		}
		p.Drop(DropDuplicate, se, src, nil)
		p.cfg.Acks.SendAcks(map[*peers.Link][]uuid.UUID{src.Link: {se.ID}})
		return false
	}
	p.Drop(DropDuplicate, se, src, nil)
	return false
}

// parseDrop names the failure class of a [proto.ParseEnvelope] error
// (§1.2). An error inside a JSON-model value is also an invalid
// envelope; its class is what went wrong in the value.
func parseDrop(err error) Drop {
	switch {
	case errors.Is(err, proto.ErrHopLimit):
		return DropHopLimit
	case errors.Is(err, proto.ErrNonCanonical):
		return DropNonCanonical
	case errors.Is(err, proto.ErrMalformed), errors.Is(err, proto.ErrTooLarge):
		return DropMalformed
	case errors.Is(err, proto.ErrInvalid):
		return DropInvalid
	}
	return DropMalformed
}

// deliver hands an admitted envelope to the commit stage; history sync's
// kinds go to the syncer, and presence only updates the table.
func (p *Pipeline) deliver(se *proto.SignedEnvelope, src Source, now time.Time) bool {
	if se.Kind == proto.KindHistoryRequest || se.Kind == proto.KindHistoryResponse {
		return p.Sync.Handle(se, src.syncSource(), now)
	}
	if se.Kind == proto.KindPresence {
		p.cfg.Clock.ObserveClock(se.From, se.Time(), src.FromSender(se.From), now)
		if p.cfg.Presence.ObserveTTL(se.From, *se.Presence, time.Duration(se.TTL)*time.Second, now) {
			p.logInfo("presence", se.From.Fingerprint(), "presence", "peer", se.From.Fingerprint(), "state", se.Presence.State.String())
		}
		p.host.Count(Presence, 1)
		p.host.Count(PresenceBytes, uint64(1+len(se.Raw)))
		return true
	}
	select {
	case p.q <- Item{Env: se, Src: src, Now: now}:
		return true
	case <-p.ctx.Done():
		p.Drop(DropShutdown, se, src, nil)
		return false
	}
}

// logInfo writes msg at Info level unless (peer, reason) logged recently.
func (p *Pipeline) logInfo(msg, peer, reason string, args ...any) {
	p.logAt(slog.LevelInfo, msg, peer, reason, args...)
}

func (p *Pipeline) logAt(lvl slog.Level, msg, peer, reason string, args ...any) {
	ok, suppressed := p.allow(lvl, peer, reason)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	p.log.Log(context.Background(), lvl, msg, args...)
}

// overBudget reports whether se is a peer-addressed envelope the commit
// stage would refuse by its sender's budget. It is asked before the
// signature check, so a flood past the budget costs a lookup per
// envelope, not a signature check over up to 1 MiB; from is not yet
// verified, but refusing (without an ack) what claims to come from a
// sender past its budget is what the commit stage does to that sender's
// own envelopes anyway.
func (p *Pipeline) overBudget(se *proto.SignedEnvelope) bool {
	if se.To.Kind != proto.DestPeer {
		return false
	}
	ok, err := p.cfg.Store.WithinBudget(se.From, len(se.Raw))
	return err == nil && !ok
}

// refuseOverBudget counts and logs an envelope refused by the sender's
// budget. It is neither stored nor acknowledged. Before the signature
// check its from is unverified, but the sender it names is past its
// budget either way, which is what the log says.
func (p *Pipeline) refuseOverBudget(se *proto.SignedEnvelope, src Source) {
	p.Drop(DropQuota, se, src, nil)
	// The store is read for the log line only, and that line is
	// rate-limited per sender like every line a peer can cause (Drop's
	// debug line has its own key).
	ok, suppressed := p.allow(slog.LevelWarn, se.From.Fingerprint(), "store_budget_warning")
	if !ok {
		return
	}
	var used history.Usage
	if u, err := p.cfg.Store.SenderUsage(se.From); err == nil {
		used = u
	}
	p.log.Warn("envelope refused: its sender's store budget is used up; the sender keeps it and re-sends it later",
		"from", se.From.Fingerprint(), "id", se.ID, "kind", se.Kind.String(), "size", len(se.Raw),
		"stored_bytes", used.Bytes, "stored_envelopes", used.Envelopes,
		"limit_bytes", p.cfg.SenderStoreBytes, "limit_envelopes", p.cfg.SenderStoreEnvelopes,
		"suppressed", suppressed)
}
