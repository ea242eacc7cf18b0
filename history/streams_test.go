package history

import (
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// When a channel holds more streams than a request carries, streams with
// holes keep their marks, and one sender's flood of fresh epochs (newer
// than every other stream) takes at most MaxMarksPerSender places.
func TestChooseMarksGapsFirstAndPerSenderCap(t *testing.T) {
	t.Parallel()
	const limit = 100
	flooder, real := proto.PubKey{1}, proto.PubKey{2}
	var all []markChoice
	for i := range 500 {
		all = append(all, markChoice{mark: proto.SeqMark{Sender: flooder, Epoch: uuid.New(), LastSeq: 1}, updated: int64(1000 + i)})
	}
	gapped := proto.SeqMark{Sender: real, Epoch: uuid.New(), LastSeq: 900}
	all = append(all, markChoice{mark: gapped, updated: 1, gap: true})
	var others []proto.SeqMark
	for i := range 50 {
		m := proto.SeqMark{Sender: proto.PubKey{3, byte(i)}, Epoch: uuid.New(), LastSeq: uint64(i + 1)}
		others = append(others, m)
		all = append(all, markChoice{mark: m, updated: int64(10 + i)})
	}
	got := chooseMarks(all, limit)
	if len(got) != limit {
		t.Fatalf("%d marks, want %d", len(got), limit)
	}
	for i := 1; i < len(got); i++ {
		if compareMarks(got[i-1], got[i]) >= 0 {
			t.Fatal("marks not sorted by (sender, epoch)")
		}
	}
	in := map[proto.SeqMark]bool{}
	perSender := map[proto.PubKey]int{}
	for _, m := range got {
		in[m] = true
		perSender[m.Sender]++
	}
	if !in[gapped] {
		t.Error("the stream with a hole lost its mark to newer streams")
	}
	for _, m := range others {
		if !in[m] {
			t.Errorf("another sender's stream %v pushed out by the flood", m.Epoch)
		}
	}
	// 100 places: 1 gap + 50 quiet + 16 flood, and the 33 left over go to
	// the flood again since no one else is left out.
	if perSender[flooder] != limit-51 {
		t.Errorf("flooder holds %d marks, want %d", perSender[flooder], limit-51)
	}
	// With 200 other senders the flood is held to MaxMarksPerSender.
	for i := range 150 {
		all = append(all, markChoice{mark: proto.SeqMark{Sender: proto.PubKey{4, byte(i)}, Epoch: uuid.New(), LastSeq: 1}, updated: int64(10 + i)})
	}
	perSender = map[proto.PubKey]int{}
	for _, m := range chooseMarks(all, limit) {
		perSender[m.Sender]++
	}
	if perSender[flooder] != MaxMarksPerSender {
		t.Errorf("flooder holds %d marks among many senders, want %d", perSender[flooder], MaxMarksPerSender)
	}
}

// ForgetGaps gives up only the holes of the senders asked for.
func TestForgetGapsOfSomeSenders(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Config{})
	alice, bob := newSender(t, "alice"), newSender(t, "bob")
	ch := uuid.New()
	d := proto.ToChannel(ch)
	for _, n := range []uint64{1, 3} {
		mustPut(t, s, alice.envSeq(t, d, t0.UnixMilli()+int64(n), n, "a"), bob.envSeq(t, d, t0.UnixMilli()+int64(n), n, "b"))
	}
	n, err := s.ForgetGaps(d, func(k proto.PubKey) bool { return k == alice.pub })
	if err != nil || n != 1 {
		t.Fatalf("ForgetGaps = %d, %v; want 1 stream", n, err)
	}
	gaps, err := s.Gaps(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gaps {
		if want := g.Sender != alice.pub; (len(g.Missing) > 0) != want {
			t.Errorf("%v: missing %v, want a hole kept: %v", g.Sender.Fingerprint(), g.Missing, want)
		}
	}
}
