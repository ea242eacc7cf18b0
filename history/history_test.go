package history

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

func historyReq(ch uuid.UUID, since int64, maxMsgs, maxBytes uint32, marks ...proto.SeqMark) *proto.HistoryRequest {
	return &proto.HistoryRequest{ChannelID: ch, SinceTS: since, SinceSeqBySender: marks, MaxMessages: maxMsgs, MaxBytes: maxBytes}
}

func mustHistory(t *testing.T, s *Store, req *proto.HistoryRequest) ([]*proto.SignedEnvelope, bool) {
	t.Helper()
	return history(t, s, req, true)
}

// history runs req and parses the page, verifying signatures if verify.
func history(t *testing.T, s *Store, req *proto.HistoryRequest, verify bool) ([]*proto.SignedEnvelope, bool) {
	t.Helper()
	raws, more, err := s.History(req)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	out := make([]*proto.SignedEnvelope, len(raws))
	for i, raw := range raws {
		se, err := proto.ParseEnvelope(raw)
		if err != nil {
			t.Fatalf("history returned an unparsable envelope: %v", err)
		}
		if !verify {
			// Parsing is enough to page; the other tests verify.
		} else if err := se.Verify(); err != nil {
			t.Fatalf("history returned an envelope that does not verify: %v", err)
		}
		out[i] = se
	}
	return out, more
}

// checkRequestValid signs req into an envelope: SignEnvelope runs the
// protocol's validation (marks sorted, limits in range).
func checkRequestValid(t *testing.T, snd *sender, req *proto.HistoryRequest) {
	t.Helper()
	e := &proto.Envelope{ID: proto.NewID(), From: snd.pub, To: proto.ToPeer(snd.pub), Kind: proto.KindHistoryRequest,
		TS: 1, TTL: 60, Seq: 1, Epoch: snd.epoch, HistoryRequest: req}
	if _, err := proto.SignEnvelope(snd.key, e); err != nil {
		t.Fatalf("next history request is invalid: %v", err)
	}
}

func TestHistoryLimits(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice := newSender(t, "alice")
	ch := uuid.New()
	var envs []*proto.SignedEnvelope
	for i := range 10 {
		envs = append(envs, alice.msg(t, ch, t0.UnixMilli()+int64(i), "same size"))
	}
	mustPut(t, s, envs...)
	mustPut(t, s, alice.msg(t, uuid.New(), t0.UnixMilli(), "another channel"))
	size := uint32(len(envs[0].Raw))
	for _, se := range envs {
		if uint32(len(se.Raw)) != size {
			t.Fatalf("test envelopes differ in size")
		}
	}
	since := t0.UnixMilli()
	for _, tc := range []struct {
		name     string
		req      *proto.HistoryRequest
		wantN    int
		wantMore bool
	}{
		{"max_messages exactly hit", historyReq(ch, since, 10, proto.MaxHistoryBytes), 10, false},
		{"max_messages cuts", historyReq(ch, since, 9, proto.MaxHistoryBytes), 9, true},
		{"max_messages above", historyReq(ch, since, 11, proto.MaxHistoryBytes), 10, false},
		{"max_bytes exactly hit", historyReq(ch, since, 100, 10*size), 10, false},
		{"max_bytes cuts on a boundary", historyReq(ch, since, 100, 3*size), 3, true},
		{"max_bytes cuts mid-envelope", historyReq(ch, since, 100, 4*size-1), 3, true},
		{"both limits at once", historyReq(ch, since, 3, 3*size), 3, true},
		{"since_ts inclusive", historyReq(ch, since+4, 100, proto.MaxHistoryBytes), 6, false},
		{"zero limits take the defaults", historyReq(ch, since, 0, 0), 10, false},
		{"unknown channel", historyReq(uuid.New(), since, 10, proto.MaxHistoryBytes), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more := mustHistory(t, s, tc.req)
			if len(got) != tc.wantN || more != tc.wantMore {
				t.Fatalf("got %d envelopes, more=%v; want %d, more=%v", len(got), more, tc.wantN, tc.wantMore)
			}
			total := 0
			for i, se := range got {
				total += len(se.Raw)
				if want := envs[len(envs)-tc.wantN+i]; tc.req.SinceTS > since && se.ID != want.ID {
					t.Errorf("envelope %d = %s, want %s", i, se.ID, want.ID)
				}
			}
			if tc.req.MaxBytes > 0 && total > int(tc.req.MaxBytes) {
				t.Errorf("page of %d bytes exceeds max_bytes %d", total, tc.req.MaxBytes)
			}
		})
	}

	t.Run("oversize envelope skipped", func(t *testing.T) {
		big := alice.msg(t, ch, t0.UnixMilli()+5, body(4000))
		mustPut(t, s, big)
		before := mustStats(t, s).HistorySkipped
		req := historyReq(ch, since, 4, 4*size+100)
		seen := map[uuid.UUID]int{}
		for pages := 0; req != nil; pages++ {
			if pages > 20 {
				t.Fatal("paging does not end")
			}
			got, more := mustHistory(t, s, req)
			for _, se := range got {
				seen[se.ID]++
			}
			if !more {
				break
			}
			req = NextHistoryRequest(req, got)
		}
		if seen[big.ID] != 0 {
			t.Errorf("an envelope larger than max_bytes was served")
		}
		for _, se := range envs {
			if seen[se.ID] != 1 {
				t.Errorf("envelope %s served %d times, want 1", se.ID, seen[se.ID])
			}
		}
		if mustStats(t, s).HistorySkipped <= before {
			t.Errorf("skipped oversize envelope not counted")
		}
	})
}

// TestHistoryPagingTies pages through 5,000 envelopes that share only 10
// timestamps, from several interleaved senders, under several limits:
// every envelope must arrive exactly once.
func TestHistoryPagingTies(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	ch := uuid.New()
	senders := make([]*sender, 7)
	for i := range senders {
		senders[i] = newSender(t, string(rune('a'+i)))
		senders[i].randomIDs = i%2 == 0
	}
	const n = 5000
	rng := rand.New(rand.NewPCG(1, 2))
	var envs []*proto.SignedEnvelope
	for i := range n {
		ts := t0.UnixMilli() + int64(i*10/n)*1000
		envs = append(envs, senders[rng.IntN(len(senders))].msg(t, ch, ts, "tie"))
	}
	size := len(envs[0].Raw)
	shuffled := append([]*proto.SignedEnvelope(nil), envs...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for i := 0; i < n; i += 500 {
		mustPut(t, s, shuffled[i:i+500]...)
	}

	for _, tc := range []struct {
		name     string
		maxMsgs  uint32
		maxBytes uint32
	}{
		{"100 messages", 100, proto.MaxHistoryBytes},
		{"333 messages", 333, proto.MaxHistoryBytes},
		{"bytes for 37", 1000, uint32(37*size + size/2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[uuid.UUID]int{}
			req := historyReq(ch, 0, tc.maxMsgs, tc.maxBytes)
			pages := 0
			for req != nil {
				pages++
				if pages > n {
					t.Fatal("paging does not end")
				}
				page, more := history(t, s, req, false)
				for _, se := range page {
					got[se.ID]++
				}
				if !more {
					break
				}
				req = NextHistoryRequest(req, page)
				checkRequestValid(t, senders[0], req)
			}
			for _, se := range envs {
				if got[se.ID] != 1 {
					t.Fatalf("envelope %s (seq %d) returned %d times", se.ID, se.Seq, got[se.ID])
				}
			}
			if len(got) != n {
				t.Fatalf("%d distinct envelopes returned, want %d", len(got), n)
			}
			t.Logf("%d pages", pages)
		})
	}
}

// TestHistoryGapFill: a requester missing numbers 6 and 7 of a stream gets
// them through its marks although they are older than since_ts.
func TestHistoryGapFill(t *testing.T) {
	t.Parallel()
	clk := &testClock{t: t0}
	a, _ := openTest(t, Config{Now: clk.now}) // responder
	b, _ := openTest(t, Config{Now: clk.now}) // requester
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	ch := uuid.New()
	var aliceEnvs []*proto.SignedEnvelope
	for i := range 20 {
		aliceEnvs = append(aliceEnvs, alice.msg(t, ch, t0.UnixMilli()+int64(i)*1000, "alice"))
	}
	var bobEnvs []*proto.SignedEnvelope
	for i := range 5 {
		bobEnvs = append(bobEnvs, bob.msg(t, ch, t0.UnixMilli()+int64(i)*1000, "bob"))
	}
	mustPut(t, a, aliceEnvs...)
	mustPut(t, a, bobEnvs...)
	mustPut(t, b, aliceEnvs[:5]...)
	mustPut(t, b, aliceEnvs[7:]...)

	gaps, err := b.Gaps(proto.ToChannel(ch))
	if err != nil || len(gaps) != 1 {
		t.Fatalf("gaps: %v, %v", gaps, err)
	}
	g := gaps[0]
	if g.Sender != alice.pub || g.Epoch != alice.epoch || g.First != 1 || g.Last != 5 || g.Max != 20 || g.Count != 18 ||
		g.Contiguous() || len(g.Missing) != 1 || g.Missing[0] != (SeqRange{6, 7}) {
		t.Fatalf("gaps = %+v, want run 1..5 of 1..20 missing 6-7", g)
	}
	marks, err := b.SeqMarks(ch)
	if err != nil || len(marks) != 1 || marks[0].LastSeq != 5 {
		t.Fatalf("marks = %+v, %v; want alice at 5", marks, err)
	}
	req := historyReq(ch, aliceEnvs[19].TS, 100, proto.MaxHistoryBytes, marks...)
	checkRequestValid(t, alice, req)
	page, more := mustHistory(t, a, req)
	if more {
		t.Fatal("more set on a small page")
	}
	got := map[uuid.UUID]bool{}
	for _, se := range page {
		got[se.ID] = true
	}
	for i, se := range aliceEnvs {
		if want := i >= 5; got[se.ID] != want {
			t.Errorf("alice seq %d: served=%v, want %v", se.Seq, got[se.ID], want)
		}
	}
	for _, se := range bobEnvs {
		if got[se.ID] {
			t.Errorf("bob seq %d is older than since_ts and unmarked but was served", se.Seq)
		}
	}
	added, err := b.PutBatch(page, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := countTrue(added); n != 2 {
		t.Errorf("requester added %d envelopes from the page, want 2 (6 and 7)", n)
	}
	if m, err := b.Get(aliceEnvs[5].From, aliceEnvs[5].ID); err != nil || !m.FromHistory {
		t.Errorf("filled envelope: %+v, %v; want it marked as history", m, err)
	}
	gaps, _ = b.Gaps(proto.ToChannel(ch))
	if len(gaps) != 1 || !gaps[0].Contiguous() || gaps[0].Last != 20 || len(gaps[0].Missing) != 0 {
		t.Errorf("after the fill: %+v, want contiguous 1..20", gaps)
	}
	if marks, _ := b.SeqMarks(ch); len(marks) != 1 || marks[0].LastSeq != 20 {
		t.Errorf("after the fill: marks %+v, want alice at 20", marks)
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func TestSequenceTracking(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{MaxPendingSeqs: 3})
	alice := newSender(t, "alice")
	ch := uuid.New()
	d := proto.ToChannel(ch)
	put := func(seqs ...uint64) {
		t.Helper()
		for _, n := range seqs {
			mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "s"))
		}
	}
	stream := func() Stream {
		t.Helper()
		g, err := s.Gaps(d)
		if err != nil || len(g) != 1 {
			t.Fatalf("gaps: %+v, %v", g, err)
		}
		return g[0]
	}

	put(5, 7, 6)
	if g := stream(); g.First != 5 || g.Last != 7 || !g.Contiguous() {
		t.Fatalf("after 5, 7, 6: %+v, want contiguous 5..7", g)
	}
	put(3) // below the first seen: a hole at 4
	if g := stream(); g.First != 5 || g.Min != 3 || g.Contiguous() || len(g.Missing) != 1 || g.Missing[0] != (SeqRange{4, 4}) {
		t.Fatalf("after 3: %+v, want hole 4", g)
	}
	put(4)
	if g := stream(); g.First != 3 || g.Last != 7 || !g.Contiguous() || g.Count != 5 {
		t.Fatalf("after 4: %+v, want contiguous 3..7", g)
	}
	put(9, 11, 13) // pending 3: at the limit
	if g := stream(); g.Last != 7 || len(g.Missing) != 3 {
		t.Fatalf("after 9, 11, 13: %+v, want run to 7 and three holes", g)
	}
	put(15) // pending 4 > 3: the hole at 8 is given up
	g := stream()
	if g.Last != 9 || g.Lost != 1 || len(g.Missing) != 3 || g.Missing[0] != (SeqRange{10, 10}) {
		t.Fatalf("after overflow: %+v, want run to 9, 1 lost, holes 10, 12, 14", g)
	}
	if _, err := s.ForgetGaps(d, nil); err != nil {
		t.Fatal(err)
	}
	g = stream()
	if !g.Contiguous() || g.Last != 15 || g.Lost != 4 || len(g.Missing) != 0 {
		t.Fatalf("after ForgetGaps: %+v, want contiguous to 15 with 4 lost", g)
	}
	put(16)
	if g := stream(); g.Last != 16 || !g.Contiguous() {
		t.Fatalf("after 16: %+v", g)
	}

	// DMs are tracked per destination too, and a new epoch is a new stream.
	us := newSender(t, "us")
	dm := proto.ToPeer(us.pub)
	mustPut(t, s, alice.envSeq(t, dm, t0.UnixMilli(), 1, "dm"), alice.envSeq(t, dm, t0.UnixMilli(), 3, "dm"))
	alice.epoch = proto.NewEpoch()
	mustPut(t, s, alice.envSeq(t, dm, t0.UnixMilli(), 1, "dm"))
	dg, err := s.Gaps(dm)
	if err != nil || len(dg) != 2 {
		t.Fatalf("dm streams: %+v, %v", dg, err)
	}
	contiguous := 0
	for _, g := range dg {
		if g.Contiguous() {
			contiguous++
		}
	}
	if contiguous != 1 {
		t.Errorf("dm streams: %+v, want one contiguous (new epoch) and one with a hole", dg)
	}
	if marks, _ := s.SeqMarks(ch); len(marks) != 1 {
		t.Errorf("channel marks include other destinations: %+v", marks)
	}
}

func TestNextHistoryRequestEmptyPage(t *testing.T) {
	t.Parallel()
	if NextHistoryRequest(historyReq(uuid.New(), 0, 10, 10), nil) != nil {
		t.Error("an empty page must end paging")
	}
}

func TestHistoryRawIsWireBytes(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice := newSender(t, "alice")
	ch := uuid.New()
	se := alice.msg(t, ch, t0.UnixMilli(), "exact bytes")
	mustPut(t, s, se)
	raws, _, err := s.History(historyReq(ch, 0, 1, proto.MaxHistoryBytes))
	if err != nil || len(raws) != 1 || !bytes.Equal(raws[0], se.Raw) {
		t.Fatalf("history did not return the stored wire bytes: %v", err)
	}
	if _, _, err := s.History(nil); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("nil request: %v", err)
	}
}

// TestHistorySharedID: two senders' channel messages that share an id
// are two envelopes: a page serves both, a requester that holds one
// stores the other, and paging by marks does not repeat either.
func TestHistorySharedID(t *testing.T) {
	t.Parallel()
	a, _ := openTest(t, Config{})
	b, _ := openTest(t, Config{})
	ch := uuid.New()
	alice, mallory := newSender(t, "alice"), newSender(t, "mallory")
	x := alice.msg(t, ch, t0.UnixMilli(), "x")
	e := mallory.msg(t, ch, t0.UnixMilli()+1, "same id").Envelope
	e.ID = x.ID
	reused, err := proto.SignEnvelope(mallory.key, &e)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, x, reused)
	mustPut(t, b, reused) // b got mallory's first
	req := historyReq(ch, t0.UnixMilli()-1000, 100, proto.MaxHistoryBytes)
	page, more := mustHistory(t, a, req)
	if more || len(page) != 2 {
		t.Fatalf("page of %d envelopes (more %v), want both", len(page), more)
	}
	added, err := b.PutBatch(page, true)
	if err != nil || countTrue(added) != 1 {
		t.Fatalf("requester added %v, %v; want alice's only", added, err)
	}
	if got, err := b.Get(alice.pub, x.ID); err != nil || !bytes.Equal(got.Raw, x.Raw) {
		t.Fatalf("alice's message after the page: %v", err)
	}
	if next := NextHistoryRequest(req, page); next != nil {
		if page, _ := mustHistory(t, a, next); len(page) != 0 {
			t.Fatalf("the next page repeats %d envelopes", len(page))
		}
	}
}
