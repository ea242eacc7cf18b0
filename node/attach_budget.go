package node

import (
	"log/slog"

	"github.com/meshd/meshd/node/rx"
	"github.com/meshd/meshd/proto"
)

// The per-sender attachment budget (docs/PROTOCOL.md §16.3, docs/SECURITY.md
// "Attachments"): the attachments listed by one member's kept envelopes
// that reach this node's inbox may total at most attachment_sender_max_mib.
// An envelope that would take its sender past it is refused at the commit
// stage like a DM past sender_store_mib (drop.quota, also counted as
// blob.quota): not stored, mirrored or acknowledged, and not remembered as
// seen, so its sender re-sends a DM, Request or Response, and catch-up
// offers a channel Message again, until retention has made room.

// cBlobQuota counts the envelopes refused by their sender's attachment
// budget (each is a drop.quota too).
var cBlobQuota = newCounter("blob.quota", famBlob, "quota")

// listedBytes is what se's attachments count against its sender's budget:
// each distinct blob once, those over attachment_max not at all.
func (at *attachments) listedBytes(se *proto.SignedEnvelope) uint64 {
	var sum uint64
	as := se.Attachments()
	for i, a := range as {
		dup := false
		for _, b := range as[:i] {
			dup = dup || b.SHA256 == a.SHA256
		}
		if !dup {
			sum += at.counted(a.Size)
		}
	}
	return sum
}

// overBudget reports whether se, which lists listed bytes of attachments,
// would take its sender past its budget, counting what earlier envelopes
// of the same commit batch took (pending, which it adds to when se fits).
func (at *attachments) overBudget(se *proto.SignedEnvelope, listed uint64, pending map[proto.PubKey]uint64) (bool, uint64) {
	at.refMu.Lock()
	used := at.usageLocked()[se.From]
	at.refMu.Unlock()
	used += pending[se.From]
	if used+listed > uint64(at.n.cfg.AttachmentSenderMax) {
		return true, used
	}
	pending[se.From] += listed
	return false, used
}

// admitAttachments removes from a commit batch the envelopes refused by
// their sender's attachment budget, and refuses them. Only envelopes whose
// attachments this node would keep count: those of other members that go
// to the inbox. Our own, a blocked member's and those of channels we do
// not subscribe to are never refused. A copy of an envelope already held
// passes, to be acknowledged as a duplicate.
func (n *Node) admitAttachments(batch []rx.Item) []rx.Item {
	if n.attach == nil {
		return batch
	}
	var pending map[proto.PubKey]uint64
	out := batch[:0]
	for _, it := range batch {
		se := it.Env
		listed := uint64(0)
		if len(se.Attachments()) > 0 && !se.From.Equal(n.id.Pub) && !n.chans.Blocked(se.From) {
			if _, _, inbox := n.rx.Classify(se); inbox {
				listed = n.attach.listedBytes(se)
			}
		}
		if listed == 0 {
			out = append(out, it)
			continue
		}
		if pending == nil {
			pending = map[proto.PubKey]uint64{}
		}
		over, used := n.attach.overBudget(se, listed, pending)
		if over {
			if seen, err := n.store.Seen(se.From, se.ID); err == nil && seen {
				over = false
			}
		}
		if !over {
			out = append(out, it)
			continue
		}
		n.refuseAttachments(it, listed, used)
	}
	clear(batch[len(out):]) // no stale references past the end
	return out
}

// refuseAttachments counts and logs an envelope refused by its sender's
// attachment budget; the log line at most once per 10 s per sender.
func (n *Node) refuseAttachments(it rx.Item, listed, used uint64) {
	se := it.Env
	n.metrics.inc(cBlobQuota)
	n.rx.Drop(rx.DropQuota, se, it.Src, nil)
	ok, suppressed := n.logRL.allow(n.log, slog.LevelWarn, se.From.Fingerprint(), "attachment_budget_warning")
	if !ok {
		return
	}
	how := "the sender keeps it and re-sends it later"
	if se.To.Kind == proto.DestChannel {
		how = "catch-up offers it again later"
	}
	n.log.Warn("envelope refused: its attachments would take its sender past its attachment budget (attachment_sender_max_mib); "+how,
		"from", se.From.Fingerprint(), "id", se.ID, "kind", se.Kind.String(), "history", it.Src.History,
		"attachment_bytes", listed, "kept_bytes", used, "limit_bytes", n.cfg.AttachmentSenderMax,
		"suppressed", suppressed)
}
