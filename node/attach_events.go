package node

import (
	"time"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// attachmentsReady announces to the event subscribers that attachments
// of an inbox item are in place beside its mailbox file. Like an
// inboxDelivery it is rendered on the subscriber's goroutine.
type attachmentsReady struct {
	n         *Node
	se        *proto.SignedEnvelope
	delivered time.Time
}

// Item renders r as an item of kind "attachments": ID, From and
// Attachments only, so readers of new items pass over it.
func (r *attachmentsReady) Item() api.Item {
	x := r.Ready()
	return api.Item{ID: x.ID, Kind: x.Kind, From: x.From, Attachments: x.Attachments}
}

// Ready renders r as the data of an "attachments" event.
func (r *attachmentsReady) Ready() api.AttachmentsReady {
	x := r.n.q.RenderEnvelope(r.se, history.InboxItem{Meta: history.Meta{ID: r.se.ID}, Delivered: r.delivered})
	return api.AttachmentsReady{Kind: "attachments", ID: x.ID, From: x.From, Attachments: x.Attachments}
}

// placedAll runs after the wants of a finished fetch were placed: each
// inbox item among them with no other fetch under way or waiting is
// announced to the event subscribers, once.
func (at *attachments) placedAll(ws []want) {
	if !at.n.q.Listening() {
		return
	}
	done := map[uuid.UUID]bool{}
	for _, w := range ws {
		if done[w.ID] || at.pendingFor(w.ID) {
			continue
		}
		done[w.ID] = true
		st, err := at.n.store.Get(w.From, w.ID)
		if err != nil {
			continue // retention took it meanwhile
		}
		se, err := st.Envelope()
		if err != nil {
			continue
		}
		at.n.q.Publish(&attachmentsReady{n: at.n, se: se, delivered: time.UnixMilli(w.Delivered)})
	}
}

// pendingFor reports whether a fetch under way or waiting still wants an
// attachment of envelope id.
func (at *attachments) pendingFor(id uuid.UUID) bool {
	at.mu.Lock()
	defer at.mu.Unlock()
	for _, f := range at.fetches {
		for _, w := range f.wants {
			if w.ID == id {
				return true
			}
		}
	}
	return false
}
