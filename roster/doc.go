// Package roster implements the roster: the org's only trust anchor, an
// admin-signed document listing every member's key and role.
//
// A roster travels as a [proto.SignedDoc] under the signing domain
// [proto.DomainRoster]. Its Body is the canonical CBOR (RFC 8949 Core
// Deterministic, see package proto) of this map with integer keys:
//
//	roster = {
//	  0: tstr org_id,      ; 1..128 bytes of UTF-8, no control characters
//	  1: uint version,     ; >= 1, strictly increasing from one roster to the next
//	  2: int timestamp,    ; Unix milliseconds when this version was made
//	  ?3: uint quorum,     ; 2.. admins; absent means 1 (an explicit 0 or 1 is refused)
//	  4: [* member],       ; sorted bytewise by pubkey, keys unique
//	}
//	member = {
//	  0: bstr(32) pubkey,  ; Ed25519 public key
//	  1: uint role,        ; 1 observer, 2 member, 3 operator, 4 admin
//	  ?2: tstr name,       ; omitted when empty; <= 128 bytes, no control characters
//	                       ; (names entering a roster pass [CheckName] too)
//	  ?3: bool archive,    ; omitted when false: the node keeps long history
//	  ?4: bstr(32) prev_key, ; with 5, or neither: the member's previous key
//	  ?5: int prev_until,  ; Unix ms; prev_key is accepted until then
//	}
//
// The complete document is {0: bstr body, 1: [* {0: bstr(32) signer,
// 1: bstr(64) sig}]} with signatures sorted by signer; each signature covers
// "meshd/roster/v1\x00" || body. Because the body travels as a byte string
// and is decoded only after it was received, adding a signature never
// changes the body, and the signatures already present stay valid.
//
// A roster has at least one admin, at most [MaxMembers] members, and a
// quorum no larger than its number of admins. Optional fields that hold
// their zero value are omitted, so a body that carries them explicitly (for
// example 3: 0) is non-canonical and refused. A quorum of 1 is the absent
// key too: 3: 1 is refused as non-canonical.
//
// A key rotation ([Roster.Rekey]) moves a member to a new key and may keep
// the old one as prev_key until prev_until: links and envelopes by it count
// as the member's until then (plus [PrevKeySkew], by the receiver's clock),
// and never for roster or policy authority. A prev_key is no member's key
// and no other member's prev_key. [Roster.Next] drops the prev_keys whose
// window has closed.
//
// [Parse] checks the structure and that every signature verifies; it does
// not judge authority. Authority is decided by [CheckBootstrap] for the
// first roster a node trusts (signed by a quorum of the admins it lists
// itself) and by [CheckUpdate] for every later one: same org, a strictly
// greater version, and signatures from at least the current roster's
// quorum of the current roster's admins.
package roster
