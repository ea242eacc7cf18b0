// Package channel implements channel policies, their ACLs, and a node's
// local subscription state.
//
// # Policy documents
//
// A channel policy says who may read and write a channel, who manages it
// and how long its history is kept. It travels as a [proto.SignedDoc]
// under the signing domain [proto.DomainPolicy] ("meshd/policy/v1\x00").
// Its Body is the canonical CBOR (RFC 8949 Core Deterministic, see package
// proto) of this map with integer keys, all of them always present, in
// ascending order:
//
//	policy = {
//	  0:  bstr(16) channel_id,         ; a UUIDv7 (RFC 9562), the same in every version
//	  1:  tstr name,                   ; 1..64 chars of [a-z0-9][a-z0-9._-]*, no '#'
//	  2:  [* principal] readers,       ; canonical order, no duplicates (see below)
//	  3:  [* principal] writers,       ; canonical order, no duplicates
//	  4:  [+ bstr(32) pubkey] admins,  ; sorted bytewise, no duplicates, at least one
//	  5:  bool allow_history_fetch,    ; false: peers refuse HistoryRequests
//	  6:  uint retention_hours,        ; 0 = default (72); at most 1,000,000
//	  7:  uint retention_messages,     ; 0 = default (10,000); at most 2^31-1
//	  8:  uint version,                ; >= 1, strictly increasing per channel
//	  9:  int timestamp,               ; Unix milliseconds when this version was made
//	  10: tstr org,                    ; 1..128 bytes of UTF-8, no control characters
//	}
//	principal = {0: bstr(32) pubkey}   ; one key, not all zero
//	          / {1: uint min_role}     ; every member whose role >= min_role:
//	                                   ; 1 observer, 2 member, 3 operator, 4 admin
//
// A principal map has exactly one entry. Reader and writer lists are
// sorted bytewise by the canonical encoding of each principal, so every
// key principal (a1 00 58 20 <key>) comes before every role principal
// (a1 01 <role>), keys in bytewise order, roles in ascending order. History
// is pruned by whichever retention limit is reached first.
//
// The complete document is {0: bstr body, 1: [* {0: bstr(32) signer,
// 1: bstr(64) sig}]} with signatures sorted bytewise by signer, each
// covering "meshd/policy/v1\x00" || body. Decoding is strict: the wrapper
// and the body must each be the one canonical encoding of their value
// (a body lacking a key, or carrying an unknown one, is refused), and a
// document with any signature that does not verify is refused as a whole.
// Known-answer vectors are in testdata/policy-*.hex.
//
// # Authority
//
// Channel policies hang off the roster, the single trust anchor. [Check]
// accepts a policy if it is for the roster's org, has at least one
// signature, and every signer and every listed channel admin is an admin
// of the current roster. One admin signature suffices (no quorum). The
// admins list names who manages the channel; it grants no access by
// itself, and any roster admin may sign a new version. An
// update ([CheckUpdate]) must also be for the same channel id with a
// strictly greater version. A [Set] holds one version per channel and
// keeps names unique per org, settling concurrent edits and name clashes
// the same way on every node whatever order documents arrive in (see
// [Set]).
//
// # Tombstones
//
// A version whose readers and writers are both empty is a tombstone
// ([Policy.Deleted]): the channel is deleted. [Policy.Tombstone] makes
// the one after a held version, with history fetch off and everything
// else kept. It is merged like any version, so an older version after it
// is a rollback, and it keeps the channel's name. A node that predates
// tombstones reads it as a version that grants nobody, which stops the
// channel's delivery all the same.
//
// # ACL
//
// [Policy.CanRead] grants k read access if k is a member of the current
// roster and is listed by key among the readers or has a role at least
// that of a role principal there. [Policy.CanWrite] does the same with
// the writers, and never grants an observer. Access is decided against the
// roster at the time of the check, so a member who leaves loses access at
// once. [New] defaults empty lists to readers role:observer (every member)
// and writers role:member.
//
// # Subscriptions
//
// [Subscriptions] is local state that never travels: whether a channel is
// subscribed (inbox, wakes), muted (inbox at low priority, no wake) or
// neither (history only).
package channel
