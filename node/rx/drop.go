package rx

import "github.com/meshd/meshd/node/syncer"

// Drop says why the receive pipeline dropped an envelope. Each drop
// increments the counter "drop.<reason>" (family
// meshd_envelopes_dropped_total, label reason; the node defines it) and
// logs at debug level. The pipeline takes the steps of docs/PROTOCOL.md
// §15, numbered alike in [Pipeline.Receive]: 0 parse, 1 signature, 2
// time, 3 roster membership, (4, peer announcements, is node/peers'), 5
// destination and ACL, 6 request rules, 7 dedupe and deliver; dedupe by
// a known id also runs between 0 and 1, before the costly signature
// check, except for a copy it would acknowledge (§16.3), which is
// verified first.
type Drop uint8

// The drop reasons.
const (
	DropNone         Drop = iota // no drop: what a check returns when the envelope passes
	DropMalformed                // §1.2 steps 1–5: not decodable into the schema
	DropNonCanonical             // §1.2 step 6: decodable, but not the one canonical encoding
	DropInvalid                  // canonical, but breaks a rule of §4–§6
	DropDuplicate
	// DropUnsolicitedResponse: a Response that answers no Request this
	// node sent to its sender.
	DropUnsolicitedResponse
	DropBadSignature
	DropExpired
	DropFuture
	DropNotMember
	DropUnknownChannel
	DropNotWriter
	DropObserverWrite
	DropNotReader
	DropMisrouted
	DropRoleTooLow
	DropHopLimit
	DropWrongOrg
	DropUnsupported
	DropStore
	// Drop reasons of history sync.
	DropHistoryUnsolicited // a response to no request of ours (or from another peer, or too late)
	DropHistoryForeign     // a nested envelope that is not a channel Message of the channel asked for
	DropHistoryOverLimit   // a response with more messages or bytes than asked for
	DropHistoryBusy        // the requester has HistoryServeConcurrency requests served already
	DropHistoryNoLink      // a request from a peer we hold no link to answer on
	DropShutdown
	// DropQuota: a DM, Request or Response refused because its sender's
	// stored envelopes reached Config.SenderStoreBytes or
	// SenderStoreEnvelopes. It is not acknowledged: the sender keeps it.
	DropQuota
	// DropTTLTooLong: ttl_secs beyond the dedupe horizon, after which a
	// copy could be accepted again.
	DropTTLTooLong
	// DropRetiredKey: an envelope signed by a member's previous key after
	// its grace window closed (roster prev_until, PROTOCOL.md §10.1).
	DropRetiredKey
	// DropLocalOnly: an envelope this node signed to itself (a subagent
	// result) came over a link. It never leaves the node, so a copy from
	// a link is someone replaying one.
	DropLocalOnly
	// DropBlocked counts what a blocked member sent that would have
	// reached the inbox.
	DropBlocked
	NumDrops
)

// DropNames are the reasons' names: the label value and the rest of the
// counter name "drop.<reason>".
var DropNames = [NumDrops]string{
	DropMalformed:           "malformed",
	DropNonCanonical:        "non_canonical",
	DropInvalid:             "invalid",
	DropDuplicate:           "duplicate",
	DropUnsolicitedResponse: "unsolicited_response",
	DropBadSignature:        "bad_signature",
	DropExpired:             "expired",
	DropFuture:              "future",
	DropNotMember:           "not_member",
	DropUnknownChannel:      "unknown_channel",
	DropNotWriter:           "not_writer",
	DropObserverWrite:       "observer_write",
	DropNotReader:           "not_reader",
	DropMisrouted:           "misrouted",
	DropRoleTooLow:          "role_too_low",
	DropHopLimit:            "hop_limit",
	DropWrongOrg:            "wrong_org",
	DropUnsupported:         "unsupported",
	DropStore:               "store_failed",
	DropHistoryUnsolicited:  "history_unsolicited",
	DropHistoryForeign:      "history_foreign",
	DropHistoryOverLimit:    "history_over_limit",
	DropHistoryBusy:         "history_busy",
	DropHistoryNoLink:       "history_no_link",
	DropShutdown:            "shutdown",
	DropQuota:               "quota",
	DropTTLTooLong:          "ttl_too_long",
	DropRetiredKey:          "retired_key",
	DropLocalOnly:           "local_only",
	DropBlocked:             "blocked",
}

func (r Drop) String() string {
	if r < NumDrops {
		return DropNames[r]
	}
	return "unknown"
}

// syncDrops maps each drop reason of the syncer to the pipeline's.
var syncDrops = [...]Drop{
	syncer.DropNone:               DropNone,
	syncer.DropShutdown:           DropShutdown,
	syncer.DropMalformed:          DropMalformed,
	syncer.DropDuplicate:          DropDuplicate,
	syncer.DropHistoryUnsolicited: DropHistoryUnsolicited,
	syncer.DropHistoryForeign:     DropHistoryForeign,
	syncer.DropHistoryOverLimit:   DropHistoryOverLimit,
	syncer.DropHistoryBusy:        DropHistoryBusy,
	syncer.DropHistoryNoLink:      DropHistoryNoLink,
}
