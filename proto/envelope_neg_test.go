package proto

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/google/uuid"
)

func u(id uuid.UUID) []byte { return id[:] }

// baseBody is, as hand-assembled map entries, the canonical body of a
// channel Message "hi" from alice (TestEnvelopeBodyHandBuilt checks it
// against the encoder).
func baseBody() entries {
	return entries{
		{cUint(0), cBytes(u(idN(1)))},
		{cUint(1), cBytes(alice[:])},
		{cUint(2), cMap(cUint(0), cBytes(u(chanID)))},
		{cUint(3), cUint(uint64(KindMessage))},
		{cUint(4), cInt(fixedTS)},
		{cUint(5), cUint(DefaultTTL)},
		{cUint(6), cUint(1)},
		{cUint(7), cBytes(u(epochA))},
		{cUint(8), cMap(cUint(0), cText("hi"))},
	}
}

// toBob is the destination map of a DM to bob.
var toBob = cMap(cUint(1), cBytes(bob[:]))

// withPayload returns baseBody addressed to "to" with kind and payload
// under key: the body of any kind.
func withPayload(to []byte, kind Kind, key uint64, payload []byte) entries {
	return baseBody().del(8).set(2, to).set(3, cUint(uint64(kind))).set(key, payload)
}

// reqBase is a hop-0 Request payload; reqBody puts a Request payload in a
// DM to bob.
func reqBase() entries {
	return entries{
		{cUint(0), cBytes(u(reqID))},
		{cUint(1), cText("run")},
		{cUint(4), cUint(0)},
	}
}

func reqBody(req entries) entries { return withPayload(toBob, KindRequest, 9, req.encode()) }

func withParams(params []byte) []byte { return reqBody(reqBase().set(2, params)).encode() }

func respBody(resp entries) entries { return withPayload(toBob, KindResponse, 10, resp.encode()) }

func respBase() entries {
	return entries{{cUint(0), cBytes(u(reqID))}, {cUint(1), cUint(uint64(StatusCompleted))}}
}

func histReqBase() entries {
	return entries{
		{cUint(0), cBytes(u(chanID))},
		{cUint(1), cInt(fixedTS)},
		{cUint(3), cUint(100)},
		{cUint(4), cUint(MaxHistoryBytes)},
	}
}

func histReqBody(h entries) entries { return withPayload(toBob, KindHistoryRequest, 12, h.encode()) }

func histRespBase() entries {
	return entries{
		{cUint(0), cBytes(u(chanID))},
		{cUint(1), cBytes(u(idN(8)))},
		{cUint(2), cUint(uint64(HistoryOK))},
	}
}

func histRespBody(h entries) entries { return withPayload(toBob, KindHistoryResponse, 13, h.encode()) }

func mark(k PubKey, epoch uuid.UUID, seq uint64) []byte {
	return cMap(cUint(0), cBytes(k[:]), cUint(1), cBytes(u(epoch)), cUint(2), cUint(seq))
}

// nested returns n nested one-element arrays around an empty array: a
// value whose containers nest n+1 deep.
func nested(n int) []byte { return cCat(bytes.Repeat([]byte{0x81}, n), []byte{0x80}) }

// repeatItems returns a definite array of n copies of item.
func repeatItems(n int, item []byte) []byte {
	return cCat(cHead(mtArray, uint64(n)), bytes.Repeat(item, n))
}

type negCase struct {
	name  string
	raw   []byte
	wants []error          // exact set of sentinels; nil means the input must parse
	is    func(error) bool // optional: the underlying cause
}

// body builds a case whose body is signed correctly and wrapped
// canonically, so only the body can be at fault.
func body(name string, b []byte, is func(error) bool, wants ...error) negCase {
	return negCase{name: name, raw: wrapSigned(keyAlice, b), wants: wants, is: is}
}

func wire(name string, raw []byte, is func(error) bool, wants ...error) negCase {
	return negCase{name: name, raw: raw, wants: wants, is: is}
}

var (
	isDup       = isErr[*cbor.DupMapKeyError]
	isUnknown   = isErr[*cbor.UnknownFieldError]
	isIndef     = isErr[*cbor.IndefiniteLengthError]
	isTag       = isErr[*cbor.TagsMdError]
	isType      = isErr[*cbor.UnmarshalTypeError]
	isExtra     = isErr[*cbor.ExtraneousDataError]
	isNested    = isErr[*cbor.MaxNestedLevelError]
	isMaxArray  = isErr[*cbor.MaxArrayElementsError]
	isMaxMap    = isErr[*cbor.MaxMapPairsError]
	isBadKeyLen = func(err error) bool { return errors.Is(err, ErrBadKey) }
)

func negativeCases() []negCase {
	b := baseBody()
	canon := b.encode()
	sig := Sign(keyAlice, DomainEnvelope, canon)
	sigB := cBytes(sig[:])
	sigWide := cCat(cHeadWidth(mtBytes, 64, 2), sig[:])
	signedB := cBytes(canon)
	signedWide := cCat(cHeadWidth(mtBytes, uint64(len(canon)), 2), canon)
	good := cMap(cUint(0), signedB, cUint(1), sigB)
	// 0x5f: indefinite byte string made of two chunks, ending in a break.
	indefSigned := cCat([]byte{0x5f}, cBytes(canon[:10]), cBytes(canon[10:]), cBreak)

	msg := func(es ...kv) []byte { return entries(es).encode() }

	cases := []negCase{
		// Positive controls: the bases the other rows mutate.
		wire("control: canonical wire", good, nil),
		body("control: request", reqBody(reqBase()).encode(), nil),
		body("control: params nested MaxJSONNestedLevels deep", withParams(nested(MaxJSONNestedLevels-1)), nil),
		body("control: response", respBody(respBase()).encode(), nil),
		body("control: history request", histReqBody(histReqBase()).encode(), nil),
		body("control: history response", histRespBody(histRespBase()).encode(), nil),

		// The wire wrapper.
		wire("empty input", nil, nil, ErrMalformed),
		wire("truncated", good[:len(good)-1], nil, ErrMalformed),
		wire("trailing byte", cCat(good, []byte{0x00}), isExtra, ErrMalformed),
		wire("wrapper is an array", cArr(signedB, sigB), isType, ErrMalformed),
		wire("wrapper keys unsorted", cMap(cUint(1), sigB, cUint(0), signedB), nil, ErrNonCanonical),
		wire("wrapper map head non-minimal", cCat(cHeadWidth(mtMap, 2, 1), cUint(0), signedB, cUint(1), sigB), nil, ErrNonCanonical),
		wire("wrapper key non-minimal", cMap(cHeadWidth(mtUint, 0, 1), signedB, cUint(1), sigB), nil, ErrNonCanonical),
		wire("signed length non-minimal", cMap(cUint(0), signedWide, cUint(1), sigB), nil, ErrNonCanonical),
		wire("sig length non-minimal", cMap(cUint(0), signedB, cUint(1), sigWide), nil, ErrNonCanonical),
		wire("wrapper unknown key", cMap(cUint(0), signedB, cUint(1), sigB, cUint(2), cUint(0)), isUnknown, ErrMalformed),
		wire("wrapper duplicate key", cMap(cUint(0), signedB, cUint(0), signedB, cUint(1), sigB), isDup, ErrMalformed),
		wire("wrapper missing sig", cMap(cUint(0), signedB), nil, ErrNonCanonical),
		wire("wrapper missing signed", cMap(cUint(1), sigB), nil, ErrNonCanonical),
		wire("wrapper signed null", cMap(cUint(0), cNull, cUint(1), sigB), nil, ErrNonCanonical),
		wire("signed is a text string", cMap(cUint(0), cText(string(canon)), cUint(1), sigB), nil, ErrMalformed),
		wire("signed is the body inline", cMap(cUint(0), canon, cUint(1), sigB), isType, ErrMalformed),
		wire("indefinite wrapper map", cCat([]byte{0xbf}, cUint(0), signedB, cUint(1), sigB, cBreak), isIndef, ErrMalformed),
		wire("indefinite signed byte string", cMap(cUint(0), indefSigned, cUint(1), sigB), isIndef, ErrMalformed),
		wire("tagged wrapper (COSE_Sign1 tag 18)", cCat([]byte{0xd2}, good), isTag, ErrMalformed),
		wire("sig 63 bytes", cMap(cUint(0), signedB, cUint(1), cBytes(sig[:63])), nil, ErrMalformed),
		wire("sig 65 bytes", cMap(cUint(0), signedB, cUint(1), cBytes(append(sig[:], 0))), nil, ErrMalformed),
		wire("sig empty", cMap(cUint(0), signedB, cUint(1), cBytes(nil)), nil, ErrMalformed),
		// An 8-byte length that wraps around to "minus the missing bytes".
		wire("signed length wraps around", cCat([]byte{0xa2, 0x00, 0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf8}, make([]byte, 59)), nil, ErrMalformed),
		wire("signed length beyond the input", cCat([]byte{0xa2, 0x00, 0x5a, 0x00, 0x01, 0x00, 0x00}, make([]byte, 100)), nil, ErrMalformed),
		wire("oversized garbage (rejected before decoding)", bytes.Repeat([]byte{0xff}, MaxEnvelopeSize+1), nil, ErrTooLarge),
		wire("oversized after a valid envelope", cCat(good, make([]byte, MaxEnvelopeSize+1-len(good))), nil, ErrTooLarge),

		// JSON-model keys hold any value, zero values included (§1.1).
		body("params 0", withParams(cUint(0)), nil),
		body("params false", withParams(cFalse), nil),
		body("params empty text", withParams(cText("")), nil),
		body("params empty array", withParams(cArr()), nil),
		body("params empty map", withParams(cMap()), nil),
		body("params null", withParams(cNull), nil),
		body("result 0", respBody(respBase().set(2, cUint(0))).encode(), nil),
		body("result empty array", respBody(respBase().set(2, cArr())).encode(), nil),

		// Non-canonical bodies: decodable, but not in the one accepted form.
		body("body keys unsorted", b.swap(0, 1).encode(), nil, ErrNonCanonical),
		body("payload key first", append(entries{b[8]}, b[:8]...).encode(), nil, ErrNonCanonical),
		body("body map head non-minimal", cCat(cHeadWidth(mtMap, 9, 1), canon[1:]), nil, ErrNonCanonical),
		body("ttl 5 as 0x19 0x00 0x05", b.set(5, cHeadWidth(mtUint, 5, 2)).encode(), nil, ErrNonCanonical),
		body("ttl 300 in four bytes", b.set(5, cHeadWidth(mtUint, DefaultTTL, 4)).encode(), nil, ErrNonCanonical),
		body("seq in eight bytes", b.set(6, cHeadWidth(mtUint, 1, 8)).encode(), nil, ErrNonCanonical),
		body("seq 1 as 0x18 0x01", b.set(6, cHeadWidth(mtUint, 1, 1)).encode(), nil, ErrNonCanonical),
		body("map key 5 as 0x18 0x05", append(append(b[:5:5], kv{cHeadWidth(mtUint, 5, 1), b[5].v}), b[6:]...).encode(), nil, ErrNonCanonical),
		body("id length non-minimal", b.set(0, cCat(cHeadWidth(mtBytes, 16, 1), u(idN(1)))).encode(), nil, ErrNonCanonical),
		body("from length in two bytes", b.set(1, cCat(cHeadWidth(mtBytes, 32, 2), alice[:])).encode(), nil, ErrNonCanonical),
		body("text length non-minimal", b.set(8, cMap(cUint(0), cCat(cHeadWidth(mtText, 2, 1), []byte("hi")))).encode(), nil, ErrNonCanonical),
		body("destination keys non-minimal", b.set(2, cMap(cHeadWidth(mtUint, 0, 1), cBytes(u(chanID)))).encode(), nil, ErrNonCanonical),
		body("in_reply_to null", b.set(8, msg(kv{cUint(0), cText("hi")}, kv{cUint(1), cNull})).encode(), nil, ErrNonCanonical),
		body("body text null", b.set(8, msg(kv{cUint(0), cNull})).encode(), nil, ErrNonCanonical),
		body("message body missing", b.set(8, cMap()).encode(), nil, ErrNonCanonical),

		// Malformed bodies.
		body("empty body", nil, nil, ErrMalformed),
		body("body trailing byte", cCat(canon, []byte{0xf6}), isExtra, ErrMalformed),
		body("body is an array", cArr(canon), isType, ErrMalformed),
		body("indefinite body map", cCat([]byte{0xbf}, canon[1:], cBreak), isIndef, ErrMalformed),
		body("indefinite text", b.set(8, cMap(cUint(0), cCat([]byte{0x7f}, cText("h"), cText("i"), cBreak))).encode(), isIndef, ErrMalformed),
		body("indefinite id", b.set(0, cCat([]byte{0x5f}, cBytes(u(idN(1))), cBreak)).encode(), isIndef, ErrMalformed),
		body("duplicate key", b.add(cUint(8), b[8].v).encode(), isDup, ErrMalformed),
		body("duplicate key adjacent", append(append(b[:6:6], b[5]), b[6:]...).encode(), isDup, ErrMalformed),
		body("duplicate destination key", b.set(2, cMap(cUint(0), cBytes(u(chanID)), cUint(0), cBytes(u(chanID)))).encode(), isDup, ErrMalformed),
		body("tag 1 on ts", b.set(4, cCat([]byte{0xc1}, cInt(fixedTS/1000))).encode(), isTag, ErrMalformed),
		body("tag 37 on id", b.set(0, cCat([]byte{0xd8, 37}, cBytes(u(idN(1))))).encode(), isTag, ErrMalformed),
		body("unknown field 14", b.set(14, cUint(0)).encode(), isUnknown, ErrMalformed),
		body("unknown field 23", b.set(23, cUint(0)).encode(), isUnknown, ErrMalformed),
		body("unknown text key", b.add(cText("x"), cUint(0)).encode(), nil, ErrMalformed),
		body("unknown field in message", b.set(8, msg(kv{cUint(0), cText("hi")}, kv{cUint(3), cUint(0)})).encode(), isUnknown, ErrMalformed),
		body("from 31 bytes", b.set(1, cBytes(alice[:31])).encode(), isBadKeyLen, ErrMalformed),
		body("from 33 bytes", b.set(1, cBytes(append(alice[:], 0))).encode(), isBadKeyLen, ErrMalformed),
		body("from as text", b.set(1, cText(alice.String())).encode(), nil, ErrMalformed),
		body("peer 31 bytes", b.set(2, cMap(cUint(1), cBytes(bob[:31]))).encode(), isBadKeyLen, ErrMalformed),
		body("id 15 bytes", b.set(0, cBytes(u(idN(1))[:15])).encode(), nil, ErrMalformed),
		body("id 17 bytes", b.set(0, cBytes(append(u(idN(1)), 0))).encode(), nil, ErrMalformed),
		body("epoch 15 bytes", b.set(7, cBytes(u(epochA)[:15])).encode(), nil, ErrMalformed),
		body("channel 17 bytes", b.set(2, cMap(cUint(0), cBytes(append(u(chanID), 0)))).encode(), nil, ErrMalformed),
		body("in_reply_to 17 bytes", b.set(8, msg(kv{cUint(0), cText("hi")}, kv{cUint(1), cBytes(make([]byte, 17))})).encode(), nil, ErrMalformed),
		body("text not UTF-8", b.set(8, msg(kv{cUint(0), cText("a\xffb")})).encode(), nil, ErrMalformed),
		body("kind 256 overflows", b.set(3, cUint(256)).encode(), isType, ErrMalformed),
		body("ttl 2^32 overflows", b.set(5, cUint(1<<32)).encode(), isType, ErrMalformed),
		body("negative ttl", b.set(5, cInt(-1)).encode(), isType, ErrMalformed),
		body("float ttl", b.set(5, cFloat16(0x5cb0)).encode(), isType, ErrMalformed),
		body("ts beyond int64", b.set(4, cUint(1<<63)).encode(), isType, ErrMalformed),
		body("destination empty", b.set(2, cMap()).encode(), nil, ErrMalformed),
		body("destination two entries", b.set(2, cMap(cUint(0), cBytes(u(chanID)), cUint(1), cBytes(bob[:]))).encode(), nil, ErrMalformed),
		body("destination unknown key", b.set(2, cMap(cUint(3), cText("x"))).encode(), isUnknown, ErrMalformed),
		body("destination null", b.set(2, cNull).encode(), nil, ErrMalformed),

		// Well-formed and canonical, but invalid.
		body("nil id", b.set(0, cBytes(make([]byte, 16))).encode(), nil, ErrInvalid),
		body("zero from", b.set(1, cBytes(make([]byte, 32))).encode(), nil, ErrInvalid),
		body("nil epoch", b.set(7, cBytes(make([]byte, 16))).encode(), nil, ErrInvalid),
		body("ttl 0", b.set(5, cUint(0)).encode(), nil, ErrInvalid),
		body("kind 0", b.set(3, cUint(0)).encode(), nil, ErrInvalid),
		body("kind 7", b.set(3, cUint(7)).encode(), nil, ErrInvalid),
		body("no payload", b.del(8).encode(), nil, ErrInvalid),
		body("two payloads", b.set(11, cMap(cUint(0), cUint(1), cUint(1), cUint(1))).encode(), nil, ErrInvalid),
		body("kind/payload mismatch", b.set(3, cUint(uint64(KindPresence))).encode(), nil, ErrInvalid),
		body("nil channel", b.set(2, cMap(cUint(0), cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("empty org", b.set(2, cMap(cUint(2), cText(""))).encode(), nil, ErrInvalid),
		body("org too long", b.set(2, cMap(cUint(2), cText(strings.Repeat("o", MaxOrgLen+1)))).encode(), nil, ErrInvalid),
		body("message to the org", b.set(2, cMap(cUint(2), cText("acme"))).encode(), nil, ErrInvalid),
		body("nil in_reply_to", b.set(8, msg(kv{cUint(0), cText("hi")}, kv{cUint(1), cBytes(make([]byte, 16))})).encode(), nil, ErrInvalid),
		body("body too long", b.set(8, msg(kv{cUint(0), cText(strings.Repeat("x", MaxBodySize+1))})).encode(), nil, ErrInvalid),

		// Request.
		body("request hop 4", reqBody(reqBase().set(3, cBytes(u(parentReq))).set(4, cUint(4))).encode(), nil, ErrInvalid, ErrHopLimit),
		body("request hop 255", reqBody(reqBase().set(3, cBytes(u(parentReq))).set(4, cUint(255))).encode(), nil, ErrInvalid, ErrHopLimit),
		body("request hop 256 overflows", reqBody(reqBase().set(3, cBytes(u(parentReq))).set(4, cUint(256))).encode(), isType, ErrMalformed),
		body("reply_to without hop", reqBody(reqBase().set(3, cBytes(u(parentReq)))).encode(), nil, ErrInvalid),
		body("nil reply_to", reqBody(reqBase().set(3, cBytes(make([]byte, 16))).set(4, cUint(1))).encode(), nil, ErrInvalid),
		body("hop without reply_to", reqBody(reqBase().set(4, cUint(1))).encode(), nil, ErrInvalid),
		body("hop missing", reqBody(reqBase().del(4)).encode(), nil, ErrNonCanonical),
		body("request nil id", reqBody(reqBase().set(0, cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("request empty intent", reqBody(reqBase().set(1, cText(""))).encode(), nil, ErrInvalid),
		body("request intent too long", reqBody(reqBase().set(1, cText(strings.Repeat("i", MaxIntentLen+1)))).encode(), nil, ErrInvalid),
		body("request to channel", withPayload(b[2].v, KindRequest, 9, reqBase().encode()).encode(), nil, ErrInvalid),
		body("request to org", withPayload(cMap(cUint(2), cText("acme")), KindRequest, 9, reqBase().encode()).encode(), nil, ErrInvalid),
		body("params byte string", withParams(cBytes([]byte("x"))), nil, ErrInvalid, ErrMalformed),
		body("params integer map key", withParams(cMap(cUint(1), cUint(2))), nil, ErrInvalid, ErrMalformed),
		body("params byte string map key", withParams(cMap(cBytes([]byte("a")), cUint(2))), nil, ErrInvalid, ErrMalformed),
		body("params NaN", withParams(cFloat16(0x7e00)), nil, ErrInvalid, ErrMalformed),
		body("params infinity", withParams(cArr(cFloat16(0x7c00))), nil, ErrInvalid, ErrMalformed),
		body("params simple value", withParams([]byte{0xe0}), nil, ErrInvalid, ErrMalformed),
		body("params float64 not shortest", withParams(cFloat64(1.5)), nil, ErrInvalid, ErrNonCanonical),
		body("params float32 not shortest", withParams(cArr(cFloat32(0.25))), nil, ErrInvalid, ErrNonCanonical),
		body("params undefined", withParams([]byte{0xf7}), nil, ErrInvalid, ErrNonCanonical),
		body("params map keys unsorted", withParams(cMap(cText("b"), cUint(1), cText("a"), cUint(2))), nil, ErrInvalid, ErrNonCanonical),
		body("params nested map unsorted", withParams(cArr(cMap(cText("bb"), cUint(1), cText("c"), cUint(2)))), nil, ErrInvalid, ErrNonCanonical),
		body("params int non-minimal", withParams(cArr(cHeadWidth(mtUint, 1, 1))), nil, ErrInvalid, ErrNonCanonical),
		body("params duplicate key", withParams(cMap(cText("a"), cUint(1), cText("a"), cUint(1))), isDup, ErrInvalid, ErrMalformed),
		body("params text not UTF-8", withParams(cText("\xff")), nil, ErrInvalid, ErrMalformed),
		body("params tagged bignum", withParams(cCat([]byte{0xc2}, cBytes([]byte{1}))), isTag, ErrMalformed),
		body("params indefinite array", withParams(cCat([]byte{0x9f}, cUint(1), cBreak)), isIndef, ErrMalformed),
		// Params sit two levels deep, so one level beyond
		// MaxJSONNestedLevels takes the body beyond MaxNestedLevels.
		body("params nested beyond MaxJSONNestedLevels", withParams(nested(MaxJSONNestedLevels)), isNested, ErrMalformed),
		body("params nested far beyond MaxNestedLevels", withParams(nested(100)), isNested, ErrMalformed),
		body("params array beyond MaxArrayElements", withParams(repeatItems(MaxArrayElements+1, cUint(0))), isMaxArray, ErrMalformed),
		body("params map beyond MaxMapPairs", withParams(manyPairs(MaxMapPairs+1)), isMaxMap, ErrMalformed),

		// Response.
		body("response status 0", respBody(respBase().set(1, cUint(0))).encode(), nil, ErrInvalid),
		body("response status 6", respBody(respBase().set(1, cUint(6))).encode(), nil, ErrInvalid),
		body("progress note beyond MaxProgressNote", respBody(respBase().set(1, cUint(uint64(StatusProgress))).set(2, cText(strings.Repeat("n", MaxProgressNote)))).encode(), nil, ErrInvalid),
		body("response nil id", respBody(respBase().set(0, cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("response result byte string", respBody(respBase().set(2, cBytes(nil))).encode(), nil, ErrInvalid, ErrMalformed),
		body("response result float not shortest", respBody(respBase().set(2, cFloat32(0.5))).encode(), nil, ErrInvalid, ErrNonCanonical),
		body("response to channel", withPayload(b[2].v, KindResponse, 10, respBase().encode()).encode(), nil, ErrInvalid),

		// Presence.
		body("presence state 0", withPayload(cMap(cUint(2), cText("acme")), KindPresence, 11, cMap(cUint(0), cUint(0), cUint(1), cUint(1))).encode(), nil, ErrInvalid),
		body("presence state 4", withPayload(cMap(cUint(2), cText("acme")), KindPresence, 11, cMap(cUint(0), cUint(4), cUint(1), cUint(1))).encode(), nil, ErrInvalid),
		body("presence to channel", withPayload(b[2].v, KindPresence, 11, cMap(cUint(0), cUint(1), cUint(1), cUint(1))).encode(), nil, ErrInvalid),

		// HistoryRequest.
		body("history max_messages 0", histReqBody(histReqBase().set(3, cUint(0))).encode(), nil, ErrInvalid),
		body("history max_messages too big", histReqBody(histReqBase().set(3, cUint(MaxHistoryMessages+1))).encode(), nil, ErrInvalid),
		body("history max_bytes 0", histReqBody(histReqBase().set(4, cUint(0))).encode(), nil, ErrInvalid),
		body("history max_bytes too big", histReqBody(histReqBase().set(4, cUint(MaxHistoryBytes+1))).encode(), nil, ErrInvalid),
		body("history nil channel", histReqBody(histReqBase().set(0, cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("history marks unsorted", histReqBody(histReqBase().set(2, cArr(mark(alice, epochA, 1), mark(bob, epochA, 1)))).encode(), nil, ErrInvalid),
		body("history marks epochs unsorted", histReqBody(histReqBase().set(2, cArr(mark(alice, epochB, 1), mark(alice, epochA, 1)))).encode(), nil, ErrInvalid),
		body("history marks duplicate", histReqBody(histReqBase().set(2, cArr(mark(alice, epochA, 1), mark(alice, epochA, 2)))).encode(), nil, ErrInvalid),
		body("history marks empty array", histReqBody(histReqBase().set(2, cArr())).encode(), nil, ErrNonCanonical),
		body("history marks indefinite", histReqBody(histReqBase().set(2, cCat([]byte{0x9f}, mark(alice, epochA, 1), cBreak))).encode(), isIndef, ErrMalformed),
		body("history mark sender 33 bytes", histReqBody(histReqBase().set(2, cArr(cMap(cUint(0), cBytes(make([]byte, 33)), cUint(1), cBytes(u(epochA)), cUint(2), cUint(1))))).encode(), isBadKeyLen, ErrMalformed),
		body("history marks beyond MaxArrayElements", histReqBody(histReqBase().set(2, repeatItems(MaxArrayElements+1, mark(alice, epochA, 1)))).encode(), isMaxArray, ErrMalformed),

		// HistoryResponse.
		body("history response status 0", histRespBody(histRespBase().set(2, cUint(0))).encode(), nil, ErrInvalid),
		body("history response status 5", histRespBody(histRespBase().set(2, cUint(5))).encode(), nil, ErrInvalid),
		body("history response nil in_reply_to", histRespBody(histRespBase().set(1, cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("history response nil channel", histRespBody(histRespBase().set(0, cBytes(make([]byte, 16)))).encode(), nil, ErrInvalid),
		body("history refused with messages", histRespBody(histRespBase().set(2, cUint(uint64(HistoryDenied))).set(3, cArr(cBytes(good)))).encode(), nil, ErrInvalid),
		body("history more false explicit", histRespBody(histRespBase().set(4, cFalse)).encode(), nil, ErrNonCanonical),
		body("history messages empty array", histRespBody(histRespBase().set(3, cArr())).encode(), nil, ErrNonCanonical),
		body("history message not a byte string", histRespBody(histRespBase().set(3, cArr(cMap()))).encode(), isType, ErrMalformed),
		body("history MaxArrayElements messages", histRespBody(histRespBase().set(3, repeatItems(MaxArrayElements, cBytes(nil)))).encode(), nil, ErrInvalid),
		body("history messages beyond MaxArrayElements", histRespBody(histRespBase().set(3, repeatItems(MaxArrayElements+1, cBytes(nil)))).encode(), isMaxArray, ErrMalformed),
		body("history messages beyond MaxHistoryMessages", histRespBody(histRespBase().set(3, repeatItems(MaxHistoryMessages+1, cBytes(nil)))).encode(), nil, ErrInvalid),
	}
	return cases
}

// manyPairs is a canonical JSON-model map of n pairs with distinct keys.
func manyPairs(n int) []byte {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = string(rune('a'+i%26)) + strings.Repeat("z", i/26)
	}
	var flat [][]byte
	for _, k := range keys {
		flat = append(flat, cText(k), cUint(0))
	}
	return cMap(flat...)
}

func TestParseEnvelopeRejects(t *testing.T) {
	for _, tc := range negativeCases() {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.raw) <= MaxEnvelopeSize {
				checkSplitWire(t, tc.raw)
			}
			se, err := ParseEnvelope(tc.raw)
			if tc.wants == nil {
				if err != nil {
					t.Fatalf("control case: %v", err)
				}
				if err := se.Verify(); err != nil {
					t.Fatalf("control case: %v", err)
				}
				return
			}
			if se != nil {
				t.Fatalf("ParseEnvelope returned an envelope with error %v", err)
			}
			if err := checkSentinels(err, tc.wants...); err != nil {
				t.Fatal(err)
			}
			if tc.is != nil && !tc.is(err) {
				t.Fatalf("error %v lacks the expected cause", err)
			}
		})
	}
}

// TestTamperEveryByte flips bits in every byte of a small signed envelope:
// each variant must fail to parse or to verify, never succeed.
func TestTamperEveryByte(t *testing.T) {
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	e.Message = &Message{Body: "hi"}
	se := mustSign(t, keyAlice, &e)
	parsed, verified := 0, 0
	for i := range se.Raw {
		for _, mask := range []byte{0x01, 0x02, 0x10, 0x80, 0xff} {
			raw := bytes.Clone(se.Raw)
			raw[i] ^= mask
			got, err := ParseEnvelope(raw)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNonCanonical) && !errors.Is(err, ErrInvalid) {
					t.Fatalf("byte %d ^ %#x: unexpected error class: %v", i, mask, err)
				}
				continue
			}
			parsed++
			if err := got.Verify(); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("byte %d ^ %#x: tampered envelope verified (err %v)", i, mask, err)
			}
			verified++
		}
	}
	// Most single-byte changes inside the body and the signature parse and
	// only the signature catches them; make sure the test exercised both.
	if parsed == 0 || verified == 0 {
		t.Fatalf("parsed %d, verify-checked %d: tamper test exercised nothing", parsed, verified)
	}
	// Truncation at every length fails too.
	for n := range len(se.Raw) {
		if _, err := ParseEnvelope(se.Raw[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d bytes: %v, want ErrMalformed", n, err)
		}
	}
}

func TestVerifyWrongKey(t *testing.T) {
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	e.Message = &Message{Body: "hi"}
	orig := mustSign(t, keyAlice, &e)

	resign := func(key ed25519.PrivateKey, from PubKey) *SignedEnvelope {
		t.Helper()
		e2 := e
		e2.From = from
		signed, err := Marshal(&e2)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseEnvelope(wrapSigned(key, signed))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// Bob claims to be alice: From is alice, the signature is bob's.
	if err := resign(keyBob, alice).Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("impersonation: Verify = %v, want ErrBadSignature", err)
	}
	// Alice's signature over her body, but From swapped to bob.
	swapped := resign(keyAlice, bob)
	swapped.Sig = orig.Sig
	if err := swapped.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("from replaced: Verify = %v, want ErrBadSignature", err)
	}
	// Bob's signature over alice's exact signed bytes.
	forged, err := ParseEnvelope(cMap(cUint(0), cBytes(orig.Signed), cUint(1), cBytes(ptr(Sign(keyBob, DomainEnvelope, orig.Signed))[:])))
	if err != nil {
		t.Fatal(err)
	}
	if err := forged.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("signature by another key: Verify = %v, want ErrBadSignature", err)
	}
	// Bob signing as himself verifies: whether bob may send is the
	// roster's decision, not the signature's.
	if got := resign(keyBob, bob); got.Verify() != nil || got.From != bob {
		t.Error("an honest envelope from bob does not verify")
	}
	// A signature under another domain over the same bytes fails.
	for _, d := range []string{DomainRoster, DomainPolicy, DomainNoiseStatic, "", "meshd/envelope/v1", "meshd/envelope/v2\x00"} {
		wrong, err := ParseEnvelope(cMap(cUint(0), cBytes(orig.Signed), cUint(1), cBytes(ptr(Sign(keyAlice, d, orig.Signed))[:])))
		if err != nil {
			t.Fatal(err)
		}
		if err := wrong.Verify(); !errors.Is(err, ErrBadSignature) {
			t.Errorf("domain %q: Verify = %v, want ErrBadSignature", d, err)
		}
	}
	// An all-zero signature fails (and does not panic).
	zero, err := ParseEnvelope(cMap(cUint(0), cBytes(orig.Signed), cUint(1), cBytes(make([]byte, 64))))
	if err != nil {
		t.Fatal(err)
	}
	if err := zero.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("zero signature: Verify = %v", err)
	}
}

// TestVerifyUsesReceivedBytes checks that Verify covers Signed as
// received: changing the decoded struct afterwards changes nothing, and
// changing Signed breaks the signature.
func TestVerifyUsesReceivedBytes(t *testing.T) {
	e := baseEnvelope(ToChannel(chanID), KindMessage)
	e.Message = &Message{Body: "hi"}
	se, err := ParseEnvelope(mustSign(t, keyAlice, &e).Raw)
	if err != nil {
		t.Fatal(err)
	}
	se.Message.Body = "changed after parsing"
	se.TTL = 1
	if err := se.Verify(); err != nil {
		t.Fatalf("Verify re-encoded the struct: %v", err)
	}
	se.Signed = bytes.Clone(se.Signed)
	se.Signed[len(se.Signed)-1] ^= 1
	if err := se.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("Verify after changing Signed = %v", err)
	}
}

// TestSplitWireLengths runs the wrapper fast path over every head width
// of the signed byte string, minimal and not.
func TestSplitWireLengths(t *testing.T) {
	var sig Signature
	sigB := cBytes(sig[:])
	for _, n := range []int{0, 1, 23, 24, 255, 256, 65535, 65536} {
		signed := make([]byte, n)
		raw := cMap(cUint(0), cBytes(signed), cUint(1), sigB)
		checkSplitWire(t, raw)
		if _, ok := splitWire(raw, &sig); !ok {
			t.Errorf("canonical wrapper with %d signed bytes refused", n)
		}
		for _, width := range []int{1, 2, 4, 8} {
			h := cHeadWidth(mtBytes, uint64(n), width)
			if bytes.Equal(h, cHead(mtBytes, uint64(n))) || (width == 1 && n > 255) || (width == 2 && n > 65535) {
				continue
			}
			raw := cMap(cUint(0), cCat(h, signed), cUint(1), sigB)
			checkSplitWire(t, raw)
			if _, err := ParseEnvelope(raw); !errors.Is(err, ErrNonCanonical) {
				t.Errorf("%d signed bytes with a %d-byte length: %v, want ErrNonCanonical", n, width, err)
			}
		}
	}
}
