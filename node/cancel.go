package node

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/meshd/meshd/history"
	"github.com/meshd/meshd/node/api"
	"github.com/meshd/meshd/proto"
)

// The counters counted in this file.
var (
	cTxCancels = newCounter("tx.cancels", famSent, "cancels")
)

// maxCancelScan bounds the inbox items Cancel looks through for an
// answer that names the peer.
const maxCancelScan = 10000

// Cancel asks the peer working on request id (one of ours) to stop: it
// sends that peer a Request for proto.IntentCancel naming id. The peer is
// req.To, or else the sender of an answer to id in the inbox.
func (n *Node) Cancel(req api.Cancel) (*api.Sent, error) {
	id, err := uuid.Parse(req.RequestID)
	if err != nil {
		return nil, badRequest("request id: %v", err)
	}
	to := req.To
	if to == "" {
		k, ok, err := n.answerer(id)
		if err != nil {
			return nil, fmt.Errorf("find an answer to %s: %w", id, err)
		}
		if !ok {
			return nil, notFound("name the peer that has it: meshctl cancel REQUEST_ID --to PEER",
				"no answer to request %s in the inbox names the peer working on it", id)
		}
		to = k.String()
	}
	params, err := json.Marshal(map[string]string{"request_id": id.String()})
	if err != nil {
		return nil, err
	}
	n.metrics.inc(cTxCancels)
	return n.Request(api.Request{To: to, Intent: proto.IntentCancel, Params: params})
}

// answerer finds the sender of the newest answer to request id.
func (n *Node) answerer(id uuid.UUID) (proto.PubKey, bool, error) {
	items, err := n.store.Inbox(history.InboxFilter{Limit: maxCancelScan})
	if err != nil {
		return proto.PubKey{}, false, err
	}
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Kind != proto.KindResponse {
			continue
		}
		held, err := n.store.GetByID(it.ID)
		if err != nil {
			return proto.PubKey{}, false, err
		}
		for j := range held {
			se, err := held[j].Envelope()
			if err == nil && se.Response != nil && se.Response.RequestID == id {
				return se.From, true, nil
			}
		}
	}
	return proto.PubKey{}, false, nil
}
