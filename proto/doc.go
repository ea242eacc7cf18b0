// Package proto defines meshd's wire format: identities, signed
// canonical-CBOR envelopes and documents, the link handshake payload and
// application frames. It does no I/O.
//
// Everything on the wire is CBOR in RFC 8949 Core Deterministic form
// (§4.2.1: shortest integer and length forms, map keys in bytewise order,
// no indefinite lengths, no tags), with small integer map keys. Decoders
// reject duplicate keys, unknown fields and inputs beyond fixed limits,
// and then re-encode what they decoded and refuse anything that does not
// come back byte for byte: each value has exactly one accepted encoding.
//
// Signatures follow COSE_Sign1 in spirit: a signed object travels as the
// byte string of its canonical encoding plus a signature over a domain
// prefix followed by those bytes. Receivers verify over the received bytes
// and never re-encode to verify. The domains are [DomainEnvelope],
// [DomainRoster], [DomainPolicy] and [DomainNoiseStatic].
//
// docs/PROTOCOL.md is the normative specification, with known-answer
// vectors in testdata/vectors.
package proto
