package chanadmin

import (
	"testing"
	"time"
)

// TestChanQuota: a burst, then the rate; the byte budget; refusals take
// nothing and are tallied by sender.
func TestChanQuota(t *testing.T) {
	q := newChanQuota(60, 3, 1000)
	var a, b [32]byte
	a[0], b[0] = 1, 2
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if !q.allow(a, 10, false, t0) {
			t.Fatalf("message %d of the burst refused", i)
		}
	}
	if q.allow(a, 10, false, t0) {
		t.Fatal("a fourth message in the same instant was taken")
	}
	if !q.allow(b, 10, false, t0) {
		t.Fatal("another sender was refused")
	}
	if !q.allow(a, 10, false, t0.Add(time.Second)) || q.allow(a, 10, false, t0.Add(time.Second)) {
		t.Fatal("want one message a second at 60 a minute")
	}
	// The byte budget: 1000 bytes an hour.
	if !q.allow(b, 900, false, t0.Add(time.Minute)) || q.allow(b, 200, false, t0.Add(time.Minute)) {
		t.Fatal("the byte budget did not hold")
	}
	if got := q.refusals(); got[a] != 2 || got[b] != 1 {
		t.Fatalf("refusals %v", got)
	}
	// History has a bucket of its own, 5 times the burst, and shares the
	// byte budget.
	h := newChanQuota(60, 3, 1<<20)
	for i := range 15 {
		if !h.allow(a, 10, true, t0) {
			t.Fatalf("history message %d of 15 refused", i)
		}
	}
	if h.allow(a, 10, true, t0) || !h.allow(a, 10, false, t0) {
		t.Fatal("history past its bucket taken, or live refused with its own bucket full")
	}
	off := newChanQuota(0, 1, 0)
	for i := range 2 {
		if !off.allow(a, 1<<20, false, t0) {
			t.Fatalf("a quota with no limits refused message %d", i+1)
		}
	}
}
