package node

import (
	"sync"
	"testing"
	"time"

	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// HistoryRequests take no number from the stream of DMs to their peer
// (§4.4): they carry sender_seq 0, and the first DM after them is 1, so
// the peer sees no gap that nothing would ever fill.
func TestHistoryRequestsTakeNoSequenceNumber(t *testing.T) {
	t.Parallel()
	rig := newPipelineRig(t) // a holds two channels b may read
	var mu sync.Mutex
	var got []*proto.SignedEnvelope
	rig.relink(func(f []byte) {
		if len(f) > 0 && proto.FrameType(f[0]) == proto.FrameEnvelope {
			if se, err := proto.ParseEnvelope(append([]byte(nil), f[1:]...)); err == nil && se.To.Kind == proto.DestPeer {
				mu.Lock()
				got = append(got, se)
				mu.Unlock()
			}
		}
	})
	kinds := func(k proto.Kind) []*proto.SignedEnvelope {
		mu.Lock()
		defer mu.Unlock()
		var out []*proto.SignedEnvelope
		for _, se := range got {
			if se.Kind == k {
				out = append(out, se)
			}
		}
		return out
	}
	// The link up makes a catch-up round due: a asks b for history.
	waitFor(t, 5*time.Second, "history request to b", func() bool { return len(kinds(proto.KindHistoryRequest)) > 0 })
	if _, err := rig.a.out.Send(api.Send{To: "b", Body: "after the history request"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "DM to b", func() bool { return len(kinds(proto.KindMessage)) == 1 })
	for _, hr := range kinds(proto.KindHistoryRequest) {
		if hr.Seq != 0 {
			t.Errorf("history request %s has sender_seq %d, want 0", hr.ID, hr.Seq)
		}
	}
	if dm := kinds(proto.KindMessage)[0]; dm.Seq != 1 {
		t.Fatalf("first DM to b has sender_seq %d, want 1: history requests took numbers", dm.Seq)
	}
}
