package node

import (
	"log/slog"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/proto"
)

// Envelope identity and per-sender budgets (docs/PROTOCOL.md §15,
// §16.3; docs/SECURITY.md "Envelope ids and per-sender budgets").

// maxTTL is the longest ttl_secs this node accepts: its dedupe horizon,
// history.Config.SeenMaxAge (144 h), which the store counts from the
// envelope's ts. An envelope that lived longer could arrive again, live,
// after its (from, id) was forgotten, and be delivered twice.
const maxTTL = 144 * 3600

// ttlWithinHorizon reports whether se expires before its dedupe entry is
// forgotten: ts + ttl ≤ ts + horizon. The store forgets an entry once ts
// is older than the horizon, and a live copy is refused once ts + ttl has
// passed, so no copy is ever both unexpired and forgotten.
func ttlWithinHorizon(se *proto.SignedEnvelope) bool { return se.TTL <= maxTTL }

// overBudget reports whether se is a peer-addressed envelope the commit
// stage would refuse by its sender's budget. It is asked before the
// signature check, so a flood past the budget costs a lookup per
// envelope, not a signature check over up to 1 MiB; from is not yet
// verified, but refusing (without an ack) what claims to come from a
// sender past its budget is what the commit stage does to that sender's
// own envelopes anyway.
func (n *Node) overBudget(se *proto.SignedEnvelope) bool {
	if se.To.Kind != proto.DestPeer {
		return false
	}
	ok, err := n.store.WithinBudget(se.From, len(se.Raw))
	return err == nil && !ok
}

// refuseOverBudget counts and logs an envelope refused by the sender's
// budget. It is neither stored nor acknowledged. Before the signature
// check its from is unverified, but the sender it names is past its
// budget either way, which is what the log says.
func (n *Node) refuseOverBudget(se *proto.SignedEnvelope, src rxSource) {
	n.drop(dropQuota, se, src, nil)
	// The store is read for the log line only, and that line is
	// rate-limited per sender like every line a peer can cause (drop's
	// debug line has its own key).
	ok, suppressed := n.logRL.allow(n.log, slog.LevelWarn, se.From.Fingerprint(), "store_budget_warning")
	if !ok {
		return
	}
	var used history.Usage
	if u, err := n.store.SenderUsage(se.From); err == nil {
		used = u
	}
	n.log.Warn("envelope refused: its sender's store budget is used up; the sender keeps it and re-sends it later",
		"from", se.From.Fingerprint(), "id", se.ID, "kind", se.Kind.String(), "size", len(se.Raw),
		"stored_bytes", used.Bytes, "stored_envelopes", used.Envelopes,
		"limit_bytes", n.cfg.SenderStoreBytes, "limit_envelopes", n.cfg.SenderStoreEnvelopes,
		"suppressed", suppressed)
}
