package syncer

import (
	"context"

	"github.com/meshd/meshd/node/peers"
	"github.com/meshd/meshd/proto"
)

// serveRoom waits, up to sendWait, until the page a HistoryRequest asks
// for fits the link's send queue (bounded in bytes, transport
// Config.SendQueueBytes). A peer that does not read its link fills the
// queue; its requests are then dropped before the store is read, so it
// cannot make us read and hold pages it will never take. The drop is
// counted as history.serve_no_room.
func (s *Syncer) serveRoom(pl *peers.Link, se *proto.SignedEnvelope) bool {
	page := int(se.HistoryRequest.MaxBytes)
	if page == 0 || page > proto.MaxHistoryBytes {
		page = proto.MaxHistoryBytes
	}
	ctx, cancel := context.WithTimeout(s.ctx, sendWait)
	defer cancel()
	if err := pl.Conn.WaitRoom(ctx, page); err != nil {
		s.count(ServeNoRoom, 1)
		s.log.Debug("history request dropped: the peer's send queue is full", "peer", se.From.Fingerprint(), "err", err)
		return false
	}
	return true
}
