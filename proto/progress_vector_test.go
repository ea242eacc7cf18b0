package proto

import "testing"

// progressVector is the known-answer vector of a progress Response (§6.3).
func progressVector(t testing.TB) vector {
	t.Helper()
	e := Envelope{ID: idN(15), From: bob, To: ToPeer(alice), Kind: KindResponse, TS: fixedTS, TTL: DefaultTTL, Seq: 4, Epoch: epochB}
	e.Response = &Response{RequestID: idN(0xa2), Status: StatusProgress, Result: mustJSON(t, `"200 of 412 tests run"`)}
	return envVector(t, "15-response-progress.txt", "Response with status progress and a note", keyBob, e,
		"status 5 (progress); the note \"200 of 412 tests run\" is the result, a JSON string of at most MaxProgressNote (1024) encoded bytes")
}
