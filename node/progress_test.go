package node

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// TestProgressResponses: several progress answers may precede the final
// one, and reach the requester; none may follow it; a note over
// MaxProgressNote is refused.
func TestProgressResponses(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	sent, err := a.out.Request(api.Request{To: "b", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}
	reqID := uuid.MustParse(sent.RequestID)
	waitFor(t, 5*time.Second, "request in b's inbox", func() bool {
		_, err := b.store.FindRequest(reqID)
		return err == nil
	})
	for _, st := range []string{"accepted", "progress", "progress", "progress", "completed"} {
		r := api.Respond{RequestID: sent.RequestID, Status: st}
		if st == "progress" {
			r.Result = []byte(`"step"`)
		}
		if _, err := b.out.Respond(r); err != nil {
			t.Fatalf("respond %s: %v", st, err)
		}
	}
	if _, err := b.out.Respond(api.Respond{RequestID: sent.RequestID, Status: "progress"}); err == nil || !strings.Contains(err.Error(), "already answered") {
		t.Fatalf("progress after the final answer: %v", err)
	}
	waitFor(t, 5*time.Second, "five answers at a", func() bool {
		items, err := a.store.Inbox(history.InboxFilter{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, it := range items {
			if it.Kind == proto.KindResponse && it.From.Equal(m.ids[1].Pub) {
				n++
			}
		}
		return n == 5
	})

	sent2, err := a.out.Request(api.Request{To: "b", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "second request at b", func() bool {
		_, err := b.store.FindRequest(uuid.MustParse(sent2.RequestID))
		return err == nil
	})
	long := []byte(`"` + strings.Repeat("n", proto.MaxProgressNote) + `"`)
	if _, err := b.out.Respond(api.Respond{RequestID: sent2.RequestID, Status: "progress", Result: long}); err == nil || !strings.Contains(err.Error(), "progress note") {
		t.Fatalf("long progress note: %v", err)
	}
}
