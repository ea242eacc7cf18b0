package transport

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/meshd/meshd/proto"
)

// creditRun sends frames of 64 KiB whose first byte is typ, 1.5 MiB in
// all, to a receiver reading at most 1 MiB/s (a 64 KiB burst) after
// grant bytes of credit, and returns how long they took to arrive, in
// order and intact, and the receiver's stats.
func creditRun(t *testing.T, typ byte, grant int) (time.Duration, LinkStats, *Link) {
	t.Helper()
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	b.RecvRate = 1 << 20
	b.RecvBurst = 64 << 10
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	got := newCollector(64)
	in.GrantRecv(grant)
	in.Start(got.handle)
	out.Start(nil)
	const frames = 24
	start := time.Now()
	var sent [][]byte
	for range frames {
		f := randomFrame(t, 64<<10)
		f[0] = typ
		sent = append(sent, f)
		if err := out.SendWait(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	for i := range frames {
		if f := got.next(t); !bytes.Equal(f, sent[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	el := time.Since(start)
	if err := in.Err(); err != nil {
		t.Fatalf("link failed: %v", err)
	}
	return el, in.Stats(), in
}

// TestRecvCreditSolicitedChunks: blob-chunk frames within the credit the
// receiver granted pass the receive limit unpaced, and use the credit up.
func TestRecvCreditSolicitedChunks(t *testing.T) {
	el, st, in := creditRun(t, byte(proto.FrameBlobChunk), 2<<20)
	// Paced, 1.5 MiB at 1 MiB/s after a 64 KiB burst would take 1.4 s.
	if el > time.Second {
		t.Errorf("1.5 MiB of chunks within the credit took %v: paced", el)
	}
	if st.RecvThrottled != 0 || st.RecvCredited < 24*64<<10 {
		t.Errorf("stats %+v: want no waits, every chunk byte credited", st)
	}
	if left := in.RecvCredit(); left > 2<<20-24*64<<10 {
		t.Errorf("credit left %d: the chunks did not use it", left)
	}
}

// TestRecvCreditUnsolicitedChunksPaced: a peer that sends blob-chunk
// frames nobody asked for (no credit granted) is paced at the receive
// limit, as before the credit existed.
func TestRecvCreditUnsolicitedChunksPaced(t *testing.T) {
	el, st, _ := creditRun(t, byte(proto.FrameBlobChunk), 0)
	if el < 1200*time.Millisecond {
		t.Errorf("1.5 MiB of unsolicited chunks arrived in %v, faster than 1 MiB/s", el)
	}
	if st.RecvThrottled == 0 || st.RecvCredited != 0 {
		t.Errorf("stats %+v: want waits and nothing credited", st)
	}
}

// TestRecvCreditBeyondGrantPaced: chunk frames past the credit granted
// are paced: 512 KiB granted, 1.5 MiB sent, so 1 MiB is paced.
func TestRecvCreditBeyondGrantPaced(t *testing.T) {
	el, st, in := creditRun(t, byte(proto.FrameBlobChunk), 512<<10)
	if el < 800*time.Millisecond {
		t.Errorf("1 MiB past the credit arrived with the rest in %v, faster than 1 MiB/s", el)
	}
	if st.RecvThrottled == 0 || st.RecvCredited != 512<<10 || in.RecvCredit() != 0 {
		t.Errorf("stats %+v, credit left %d: want waits and exactly the grant credited", st, in.RecvCredit())
	}
}

// TestRecvCreditOtherFramesPaced: a credit covers blob-chunk frames
// only; other frames are paced however much credit there is.
func TestRecvCreditOtherFramesPaced(t *testing.T) {
	el, st, in := creditRun(t, byte(proto.FrameEnvelope), 4<<20)
	if el < 1200*time.Millisecond {
		t.Errorf("1.5 MiB of envelope frames arrived in %v, faster than 1 MiB/s", el)
	}
	if st.RecvCredited != 0 || in.RecvCredit() != 4<<20 {
		t.Errorf("stats %+v, credit left %d: envelope frames took credit", st, in.RecvCredit())
	}
}

// TestGrantRecvCapped: the credit never exceeds MaxRecvCredit.
func TestGrantRecvCapped(t *testing.T) {
	var l Link
	l.GrantRecv(MaxRecvCredit - 10)
	l.GrantRecv(1 << 20)
	l.GrantRecv(-5)
	if got := l.RecvCredit(); got != MaxRecvCredit {
		t.Errorf("credit %d, want %d", got, MaxRecvCredit)
	}
}

// TestLastOther: a link notes when a frame other than an attachment
// transfer's went either way, and only then.
func TestLastOther(t *testing.T) {
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	got := newCollector(8)
	in.Start(got.handle)
	out.Start(nil)
	for _, typ := range []proto.FrameType{proto.FrameBlobChunk, proto.FrameBlobWant} {
		if err := out.Send([]byte{byte(typ), 1, 2}); err != nil {
			t.Fatal(err)
		}
		got.next(t)
	}
	if !out.LastOther().IsZero() || !in.LastOther().IsZero() {
		t.Fatalf("transfer frames noted: sent %v, received %v", out.LastOther(), in.LastOther())
	}
	before := time.Now()
	if err := out.Send([]byte{byte(proto.FrameEnvelope), 1, 2}); err != nil {
		t.Fatal(err)
	}
	got.next(t)
	if out.LastOther().Before(before) || in.LastOther().Before(before) {
		t.Fatalf("an envelope frame not noted: sent %v, received %v, sent after %v", out.LastOther(), in.LastOther(), before)
	}
}
