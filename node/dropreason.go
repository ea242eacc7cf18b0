package node

// dropReason says why the receive pipeline dropped an envelope. Each drop
// increments the counter "drop.<reason>" (family
// meshd_envelopes_dropped_total, label reason) and logs at debug level.
// The receive pipeline takes the steps of docs/PROTOCOL.md §15, numbered
// alike in receive: 0 parse, 1 signature, 2 time, 3 roster membership,
// (4, peer announcements, is in handlePeers), 5 destination and ACL, 6
// request rules, 7 dedupe and deliver; dedupe by a known id also runs
// between 0 and 1, before the costly signature check, except for a copy
// it would acknowledge (§16.3), which is verified first.
type dropReason uint8

const (
	dropNone         dropReason = iota // no drop: what a check returns when the envelope passes
	dropMalformed                      // §1.2 steps 1–5: not decodable into the schema
	dropNonCanonical                   // §1.2 step 6: decodable, but not the one canonical encoding
	dropInvalid                        // canonical, but breaks a rule of §4–§6
	dropDuplicate
	// dropUnsolicitedResponse: a Response that answers no Request this
	// node sent to its sender.
	dropUnsolicitedResponse
	dropBadSignature
	dropExpired
	dropFuture
	dropNotMember
	dropUnknownChannel
	dropNotWriter
	dropObserverWrite
	dropNotReader
	dropMisrouted
	dropRoleTooLow
	dropHopLimit
	dropWrongOrg
	dropUnsupported
	dropStore
	// Drop reasons of history sync.
	dropHistoryUnsolicited // a response to no request of ours (or from another peer, or too late)
	dropHistoryForeign     // a nested envelope that is not a channel Message of the channel asked for
	dropHistoryOverLimit   // a response with more messages or bytes than asked for
	dropHistoryBusy        // the requester has HistoryServeConcurrency requests served already
	dropHistoryNoLink      // a request from a peer we hold no link to answer on
	dropShutdown
	// dropQuota: a DM, Request or Response refused because its sender's
	// stored envelopes reached Config.SenderStoreBytes or
	// SenderStoreEnvelopes. It is not acknowledged: the sender keeps it.
	dropQuota
	// dropTTLTooLong: ttl_secs beyond the dedupe horizon, after which a
	// copy could be accepted again.
	dropTTLTooLong
	// dropRetiredKey: an envelope signed by a member's previous key after
	// its grace window closed (roster prev_until, PROTOCOL.md §10.1).
	dropRetiredKey
	// dropLocalOnly: an envelope this node signed to itself (a subagent
	// result) came over a link. It never leaves the node, so a copy from
	// a link is someone replaying one.
	dropLocalOnly
	// dropBlocked counts what a blocked member sent that would have
	// reached the inbox.
	dropBlocked
	numDropReasons
)

// dropReasonNames are the reasons' names: the label value and the rest of
// the counter name "drop.<reason>".
var dropReasonNames = [numDropReasons]string{
	dropMalformed:           "malformed",
	dropNonCanonical:        "non_canonical",
	dropInvalid:             "invalid",
	dropDuplicate:           "duplicate",
	dropUnsolicitedResponse: "unsolicited_response",
	dropBadSignature:        "bad_signature",
	dropExpired:             "expired",
	dropFuture:              "future",
	dropNotMember:           "not_member",
	dropUnknownChannel:      "unknown_channel",
	dropNotWriter:           "not_writer",
	dropObserverWrite:       "observer_write",
	dropNotReader:           "not_reader",
	dropMisrouted:           "misrouted",
	dropRoleTooLow:          "role_too_low",
	dropHopLimit:            "hop_limit",
	dropWrongOrg:            "wrong_org",
	dropUnsupported:         "unsupported",
	dropStore:               "store_failed",
	dropHistoryUnsolicited:  "history_unsolicited",
	dropHistoryForeign:      "history_foreign",
	dropHistoryOverLimit:    "history_over_limit",
	dropHistoryBusy:         "history_busy",
	dropHistoryNoLink:       "history_no_link",
	dropShutdown:            "shutdown",
	dropQuota:               "quota",
	dropTTLTooLong:          "ttl_too_long",
	dropRetiredKey:          "retired_key",
	dropLocalOnly:           "local_only",
	dropBlocked:             "blocked",
}

func (r dropReason) String() string {
	if r < numDropReasons {
		return dropReasonNames[r]
	}
	return "unknown"
}

var (
	famDropped = newFamily("meshd_envelopes_dropped_total", "Envelopes dropped by the receive pipeline, by reason.", "reason")
	// cDrop counts the drops, one counter per reason.
	cDrop = newCounterVec[dropReason]("drop.", famDropped, dropReasonNames[:])
)
