package syncer

import (
	"testing"

	"github.com/google/uuid"

	"github.com/meshd/meshd/proto"
)

// A page advances a request when it holds an envelope above its stream's
// mark, or of an unmarked stream at or after since_ts; anything else is a
// page that would never move paging on.
func TestPageAdvances(t *testing.T) {
	a, b := proto.PubKey{1}, proto.PubKey{2}
	ep := uuid.New()
	req := &proto.HistoryRequest{SinceTS: 1000, SinceSeqBySender: []proto.SeqMark{{Sender: a, Epoch: ep, LastSeq: 5}}}
	env := func(from proto.PubKey, seq uint64, ts int64) *proto.SignedEnvelope {
		return &proto.SignedEnvelope{Envelope: proto.Envelope{From: from, Epoch: ep, Seq: seq, TS: ts}}
	}
	for _, c := range []struct {
		name string
		page []*proto.SignedEnvelope
		want bool
	}{
		{"above the mark, however old", []*proto.SignedEnvelope{env(a, 6, 1)}, true},
		{"at the mark", []*proto.SignedEnvelope{env(a, 5, 2000)}, false},
		{"unmarked, at since_ts", []*proto.SignedEnvelope{env(b, 1, 1000)}, true},
		{"unmarked, before since_ts", []*proto.SignedEnvelope{env(b, 9, 999)}, false},
		{"one of several", []*proto.SignedEnvelope{env(a, 1, 1), env(b, 1, 1), env(b, 2, 1001)}, true},
		{"empty", nil, false},
	} {
		if got := advances(req, c.page); got != c.want {
			t.Errorf("%s: advances = %v, want %v", c.name, got, c.want)
		}
	}
}
