package transport

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/meshd/meshd/internal/testpar"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	var l Link
	l.GrantRecv(MaxRecvCredit - 10)
	l.GrantRecv(1 << 20)
	l.GrantRecv(-5)
	if got := l.RecvCredit(); got != MaxRecvCredit {
		t.Errorf("credit %d, want %d", got, MaxRecvCredit)
	}
}

// lastOther returns when the last frame other than a transfer's went
// over l either way: the zero time if none did.
func lastOther(l *Link) time.Time {
	if t := l.otherAt[l.otherN.Load()%otherRing].Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// TestLastOther: a link notes when a frame other than an attachment
// transfer's went either way, and only then, and whether the last four
// went within a given time.
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
	if !lastOther(out).IsZero() || !lastOther(in).IsZero() {
		t.Fatalf("transfer frames noted: sent %v, received %v", lastOther(out), lastOther(in))
	}
	before := time.Now()
	if err := out.Send([]byte{byte(proto.FrameEnvelope), 1, 2}); err != nil {
		t.Fatal(err)
	}
	got.next(t)
	if lastOther(out).Before(before) || lastOther(in).Before(before) {
		t.Fatalf("an envelope frame not noted: sent %v, received %v, sent after %v", lastOther(out), lastOther(in), before)
	}
	// One envelope is not traffic to give way to; four within the
	// window are, and they stop being once the window has passed.
	if out.OthersWithin(time.Minute) || in.OthersWithin(time.Minute) {
		t.Fatal("one envelope counted as envelopes moving")
	}
	mid := time.Now() // after the first envelope went, and came
	for range 3 {
		if err := out.Send([]byte{byte(proto.FrameEnvelope), 1, 2}); err != nil {
			t.Fatal(err)
		}
		got.next(t)
	}
	if !out.OthersWithin(time.Minute) || !in.OthersWithin(time.Minute) {
		t.Fatal("four envelopes within a minute not counted as envelopes moving")
	}
	if out.OthersWithin(time.Since(mid)) || in.OthersWithin(time.Since(mid)) {
		t.Fatal("four envelopes counted within less time than they took")
	}
}

// assembleChunkFrame feeds a's assembler a blob-chunk frame of n bytes
// filled with fill, in records as a link carries it (built in rec, which
// holds one), and returns it.
func assembleChunkFrame(t *testing.T, a *assembler, rec []byte, n int, fill byte) []byte {
	t.Helper()
	first := true
	for n > 0 {
		k := min(n, maxChunk)
		n -= k
		rec = rec[:1+k]
		rec[0] = hdrChunk
		if n == 0 {
			rec[0] = hdrFinal
		}
		for j := 1; j < len(rec); j++ {
			rec[j] = fill
		}
		if first {
			rec[1], first = creditedFrame, false
		}
		if n == 0 {
			break
		}
		if m, err := a.add(rec); err != nil || m.kind != 0 {
			t.Fatalf("a part of the frame: %v, %v", m.kind, err)
		}
	}
	m, err := a.add(rec)
	if err != nil || m.kind != hdrFinal {
		t.Fatalf("the frame's end: %v, %v", m.kind, err)
	}
	return m.frame
}

// TestChunkFramesRecycled: a blob-chunk frame handed back with
// RecycleChunkFrame is read into again, so a transfer does not allocate
// a new frame per chunk, and the next frame read into a recycled buffer
// holds its own bytes only; a frame of another size is not taken.
func TestChunkFramesRecycled(t *testing.T) {
	const n = proto.ChunkSize + 60
	a := &assembler{max: proto.MaxFrameSize}
	RecycleChunkFrame(make([]byte, 10)) // another size: ignored
	rec := make([]byte, 1+maxChunk)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 100
	for i := range rounds {
		f := assembleChunkFrame(t, a, rec, n-i, byte(i))
		if len(f) != n-i || cap(f) != chunkFrameCap || f[0] != creditedFrame || f[len(f)-1] != byte(i) ||
			bytes.Count(f[1:], []byte{byte(i)}) != len(f)-1 {
			t.Fatalf("frame %d: %d bytes (cap %d), not its own content", i, len(f), cap(f))
		}
		RecycleChunkFrame(f)
	}
	runtime.ReadMemStats(&after)
	// A frame allocated per round would be rounds*chunkFrameCap; the
	// pool's boxes, and the buffers the race detector's pool drops at
	// random, take far less.
	if got := after.TotalAlloc - before.TotalAlloc; got > rounds*chunkFrameCap/2 {
		t.Fatalf("%d rounds allocated %d bytes: the frames are not reused", rounds, got)
	}
}

// TestSentChunkFramesRecycled: a blob-chunk frame built in ChunkFrameBuf
// and sent in the bulk lane goes back to the pool once the link has
// written it, so a serving node takes the same few buffers over and over
// too. The receiver recycles what it is handed, as a fetch does; a new
// frame per chunk sent would allocate a frame a round, the recycling of
// both ends next to none.
func TestSentChunkFramesRecycled(t *testing.T) {
	if testpar.Race {
		t.Skip("the race detector's sync.Pool drops buffers at random: allocations do not tell")
	}
	checkLeaks(t)
	a, b := testConfig(t, testOrg), testConfig(t, testOrg)
	out, in := pair(t, listen(t, "tcp", b), a, nil)
	got := newCollector(1)
	in.Start(got.handle)
	out.Start(nil)
	in.GrantRecv(MaxRecvCredit)
	const n = proto.ChunkSize
	round := func(i int) {
		f, data := proto.BlobChunkDataFrame(ChunkFrameBuf(), proto.Hash{1}, uint32(i), n)
		for j := range data {
			data[j] = byte(i)
		}
		if err := out.SendBulkWait(context.Background(), f); err != nil {
			t.Fatal(err)
		}
		r := got.next(t)
		if len(r) != len(f) || r[len(r)-1] != byte(i) {
			t.Fatalf("frame %d: %d bytes, want %d, of its own content", i, len(r), len(f))
		}
		RecycleChunkFrame(r)
	}
	round(0) // the link's buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 100
	for i := range rounds {
		round(i + 1)
	}
	runtime.ReadMemStats(&after)
	t.Logf("%d rounds allocated %d bytes", rounds, after.TotalAlloc-before.TotalAlloc)
	if got := after.TotalAlloc - before.TotalAlloc; got > rounds*chunkFrameCap/2 {
		t.Fatalf("%d rounds allocated %d bytes (%.2f frames a round): the frames sent are not reused",
			rounds, got, float64(got)/float64(rounds*chunkFrameCap))
	}
}
