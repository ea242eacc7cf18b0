package node

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// A request received before a restart can still be answered: the request
// book starts empty, and a miss is looked up in the inbox.
func TestRespondAfterRestart(t *testing.T) {
	t.Parallel()
	m, a, b := linkedPair(t)
	sent, err := a.out.Request(api.Request{To: "b", Intent: "run-tests"})
	if err != nil {
		t.Fatal(err)
	}
	reqID, err := uuid.Parse(sent.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "request in b's inbox", func() bool {
		se, err := b.store.FindRequest(reqID)
		return err == nil && se.From.Equal(m.ids[0].Pub)
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The restarted node's sender is new (outbound.New), so its request
	// book is empty: the answer below needs the inbox lookup.
	b2 := m.start(1, tcpAddr(t, a))
	waitFor(t, 5*time.Second, "relink", func() bool { return linked(a, m.ids[1].Pub) })
	if _, err := b2.out.Respond(api.Respond{RequestID: sent.RequestID, Status: "completed"}); err != nil {
		t.Fatalf("respond after a restart: %v", err)
	}
	waitFor(t, 5*time.Second, "response at a", func() bool {
		items, err := a.store.Inbox(history.InboxFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.Kind == proto.KindResponse && it.From.Equal(m.ids[1].Pub) {
				return true
			}
		}
		return false
	})
	// An id no request has is still refused.
	if _, err := b2.out.Respond(api.Respond{RequestID: uuid.NewString(), Status: "completed"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("respond to an unknown request: %v, want ErrNotFound", err)
	}
}
